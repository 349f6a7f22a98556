/* bookchat's chat page, enhanced: stream answers instead of reloading the page.
 *
 * The page works without this file (forms post and the server renders the answer). With it,
 * the ask form sends the question to /api/v1/ask/stream on the page's own session and CSRF
 * token, shows the answer's text as it is written, then swaps in the server-rendered answer
 * (/answers/<id>) so citations, sources and feedback look exactly as after a reload.
 * Thumbs are sent to /api/v1/answers/<id>/feedback without leaving the page.
 * A question refused with 429 (a limit reached: the class asks at once) shows "Many questions at once — trying again
 * in N s" in the answer's place, counting down Retry-After, and is sent once more by itself; a second 429 says when
 * to try again and stops.
 * Every code block of an answer gets a Copy button (a real <button>, so keyboard-reachable; the
 * result is announced in the page's live region). "/" puts the cursor in the search box; opening a search
 * result tells /api/v1/search/<id>/opened which one (the coverage gaps count searches nothing was opened from).
 * Those paths are relative to the page's root, which the page names (<body data-root>: "/", or "/chat/" when
 * bookchat is served under a sub-path).
 * "Ask the course staff" under an answer posts to /api/v1/answers/<id>/handoff instead of its form's page route;
 * the hand-off's token is kept in localStorage (per book, beyond the conversation and the session), and each kept
 * hand-off's status (the status URL's own page block, /api/v1/handoffs/<token> as HTML, so it looks as without
 * this file) is shown under its answer when the answer is on the page, else in "Your questions to the course
 * staff": on load, when the reader comes back to the tab, and every few minutes while one waits.
 * Its strings are in the page's language: t() looks them up in the catalogue the page embeds (<script
 * id="bookchat-messages">, the djangojs catalogue of bookchat/locale), English when it has none.
 */
(function () {
  "use strict";

  var root = document.body.dataset.root || "/";
  var form = document.getElementById("ask-form");
  var conversation = document.getElementById("conversation");
  if (!form || !conversation || !window.fetch || !window.TextDecoder || !window.DOMParser) return;

  var live = document.getElementById("live");
  var question = document.getElementById("question");
  var selected = document.getElementById("selected_text");
  var button = document.getElementById("ask-button");
  var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  var book = conversation.dataset.book;
  var busy = false;
  var RETRY_CAP = 60;  // s: a 429's wait up to this is waited out and the question sent again, once; longer, said

  var MESSAGES = (function () {
    var node = document.getElementById("bookchat-messages");
    try { return (node && JSON.parse(node.textContent)) || {}; } catch (ignored) { return {}; }
  })();

  /* msgid in the page's language, its {name}s filled from params. */
  function t(msgid, params) {
    var text = typeof MESSAGES[msgid] === "string" ? MESSAGES[msgid] : msgid;
    return !params ? text : text.replace(/\{(\w+)\}/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : whole;
    });
  }

  function AskError(message) { this.message = message; }

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  function announce(text) {
    live.textContent = "";
    window.setTimeout(function () { live.textContent = text; }, 50);
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var scratch = element("textarea");  // http on a LAN address: the old way
    scratch.value = text;
    scratch.setAttribute("readonly", "");
    scratch.style.position = "fixed";
    scratch.style.opacity = "0";
    document.body.appendChild(scratch);
    scratch.select();
    var copied = document.execCommand("copy");
    scratch.remove();
    return copied ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }

  function addCopyButtons(root) {
    // A code block scrolls sideways when its lines are long: focusable, so the keyboard can scroll it too.
    root.querySelectorAll(".answer-text pre").forEach(function (pre) { pre.tabIndex = 0; });
    root.querySelectorAll(".bookchat-code").forEach(function (block) {
      if (block.querySelector(".code-copy")) return;
      var code = block.querySelector("pre code") || block.querySelector("pre");
      if (!code) return;
      var title = block.querySelector(".bookchat-code-title");
      var copy = element("button", "code-copy", t("Copy"));
      copy.type = "button";
      copy.setAttribute("aria-label", title ? t("Copy code: {title}", { title: title.textContent }) : t("Copy code"));
      copy.addEventListener("click", function () {
        copyText(code.textContent).then(function () {
          copy.textContent = t("Copied");
          announce(t("Code copied to the clipboard."));
        }, function () {
          copy.textContent = t("Copy failed");
          announce(t("Couldn't copy the code; select it and copy by hand."));
        }).then(function () {
          window.setTimeout(function () { copy.textContent = t("Copy"); }, 2000);
        });
      });
      block.appendChild(copy);
    });
  }

  addCopyButtons(conversation);

  function pendingTurn(text) {
    var turn = element("article", "turn pending");
    var asked = element("div", "question");
    asked.appendChild(element("span", "who", t("You asked")));
    var said = element("p", "", text);
    said.dir = "auto";
    asked.appendChild(said);
    var answer = element("div", "answer");
    var head = element("div", "answer-head");
    head.appendChild(element("span", "who", t("Answer")));
    var body = element("div", "answer-text streaming");
    body.dir = "auto";
    body.setAttribute("aria-busy", "true");
    body.textContent = "…";
    answer.appendChild(head);
    answer.appendChild(body);
    turn.appendChild(asked);
    turn.appendChild(answer);
    return turn;
  }

  /* The seconds a 429 asks to wait: its Retry-After (seconds or a date), else the "try again in N s" of its
   * message; 0 when neither says. */
  function retryAfter(response, message) {
    var header = (response.headers.get("Retry-After") || "").trim();
    if (/^\d+$/.test(header)) return Math.max(1, parseInt(header, 10));
    if (header && !isNaN(Date.parse(header))) return Math.max(1, Math.ceil((Date.parse(header) - Date.now()) / 1000));
    var said = /try again in (\d+)\s*s/.exec(message || "");
    return said ? Math.max(1, parseInt(said[1], 10)) : 0;
  }

  function duration(seconds) {
    return seconds < 120 ? t("{n} s", { n: seconds }) : t("{n} min", { n: Math.ceil(seconds / 60) });
  }

  async function errorMessage(response, what) {
    var retry = retryAfter(response);
    if (response.status === 429 && retry) {
      return what === "hand-offs" ? t("Too many questions to the course staff; try again in {wait}.", { wait: duration(retry) })
        : t("Many questions at once — try again in {wait}.", { wait: duration(retry) });
    }
    try {
      var data = await response.json();
      if (data && data.message) return data.message.charAt(0).toUpperCase() + data.message.slice(1) + ".";
    } catch (ignored) { /* not JSON */ }
    return t("The server answered with an error (HTTP {status}). Please try again.", { status: response.status });
  }

  /* Call onEvent(name, data) for each Server-Sent Event of the response body. */
  async function readEvents(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    for (;;) {
      var chunk = await reader.read();
      buffer += decoder.decode(chunk.value || new Uint8Array(), { stream: !chunk.done });
      buffer = buffer.replace(/\r\n/g, "\n");
      var end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        var block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        var name = "message";
        var data = "";
        block.split("\n").forEach(function (line) {
          if (line.indexOf("event:") === 0) name = line.slice(6).trim();
          else if (line.indexOf("data:") === 0) data += line.slice(5).trim();
        });
        if (data) onEvent(name, JSON.parse(data));
      }
      if (chunk.done) return;
    }
  }

  async function fetchTurn(answerId) {
    var response = await fetch(root + "answers/" + encodeURIComponent(answerId), { credentials: "same-origin" });
    if (!response.ok) return null;
    var doc = new DOMParser().parseFromString(await response.text(), "text/html");
    return doc.querySelector("article.turn");
  }

  function showError(turn, message) {
    var body = turn.querySelector(".answer-text");
    body.removeAttribute("aria-busy");
    body.classList.remove("streaming");
    body.textContent = "";
    var alert = element("p", "error", message);
    alert.setAttribute("role", "alert");
    body.appendChild(alert);
    turn.classList.add("failed");
  }

  function postQuestion(payload) {
    return fetch(root + "api/v1/ask/stream", {
      method: "POST", credentials: "same-origin", body: JSON.stringify(payload),
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
    });
  }

  /* Show "Many questions at once — trying again in N s" in the pending answer, counting down; resolves when the
   * wait is over. Announced once (the countdown itself is not read out every second). */
  function waitOut(turn, seconds) {
    var body = turn.querySelector(".answer-text");
    var note = element("p", "notice rate-limited");
    body.textContent = "";
    body.appendChild(note);
    announce(t("Many questions at once. Trying again in {n} seconds.", { n: seconds }));
    return new Promise(function (resolve) {
      var end = Date.now() + seconds * 1000;
      (function tick() {
        var left = Math.ceil((end - Date.now()) / 1000);
        if (left <= 0) {
          body.textContent = "…";
          return resolve();
        }
        note.textContent = t("Many questions at once — trying again in {wait}", { wait: duration(left) });
        window.setTimeout(tick, Math.min(1000, end - Date.now()));
      })();
    });
  }

  /* The question's response; a 429 is waited out in the answer's place and the question sent once more (a second
   * 429 is returned: the student may ask again). A wait over RETRY_CAP seconds (an hourly limit) is said, not
   * waited for. */
  async function sendQuestion(payload, turn) {
    var response = await postQuestion(payload);
    var wait = response.status === 429 ? retryAfter(response) : 0;
    if (!wait || wait > RETRY_CAP) return response;
    await waitOut(turn, wait);
    return postQuestion(payload);
  }

  async function ask(text) {
    var turn = pendingTurn(text);
    conversation.appendChild(turn);
    turn.scrollIntoView({ block: "nearest" });
    var body = turn.querySelector(".answer-text");
    var payload = { question: text, book: book };
    if (conversation.dataset.session) payload.session_id = conversation.dataset.session;
    if (selected && selected.value.trim()) payload.selected_text = selected.value.trim();
    announce(t("Answering…"));
    var streamed = "";
    try {
      var response = await sendQuestion(payload, turn);
      if (!response.ok) throw new AskError(await errorMessage(response));
      var final = null;
      await readEvents(response, function (name, data) {
        if (name === "token") {
          streamed += data.text;
          body.textContent = streamed;
        } else if (name === "final") {
          final = data;
        } else if (name === "error") {
          throw new AskError(data.message || t("The answer failed; please ask again."));
        }
      });
      if (!final) throw new AskError(t("The answer was cut off; please ask again."));
      conversation.dataset.session = final.session_id;
      var rendered = await fetchTurn(final.answer_id);
      if (rendered) {
        turn.replaceWith(rendered);
        body = rendered.querySelector(".answer-text");
      } else {
        body.innerHTML = final.answer_html;  // sanitised by the server
        body.classList.remove("streaming");
        body.removeAttribute("aria-busy");
      }
      // The answer is read once, now that it is final, as it is shown (no Markdown marks); the streamed text was
      // in no live region.
      var spoken = body.textContent.trim();
      addCopyButtons(body);
      question.value = "";
      if (selected) selected.value = "";
      announce(spoken);
    } catch (error) {
      var message = error instanceof AskError ? error.message
        : t("Couldn't reach bookchat. Check your connection and try again.");
      showError(turn, message);
      announce(message);
    }
  }

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    var text = question.value.trim();
    var old = document.getElementById("form-error");
    if (old) old.remove();
    if (!text) {
      question.focus();
      return;
    }
    if (busy) return;
    busy = true;
    button.disabled = true;
    try {
      await ask(text);
    } finally {
      busy = false;
      button.disabled = false;
      question.focus();
    }
  });

  question.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit ? form.requestSubmit() : button.click();
    }
  });

  conversation.addEventListener("submit", async function (event) {
    var feedback = event.target.closest("form.feedback");
    if (!feedback) return;
    event.preventDefault();
    var rating = event.submitter && event.submitter.value;
    if (rating !== "up" && rating !== "down") return;
    var answerId = feedback.closest("article.turn").dataset.answerId;
    var status = feedback.querySelector(".feedback-status");
    var payload = { rating: rating, comment: feedback.elements.comment.value.trim() };
    if (conversation.dataset.session) payload.session_id = conversation.dataset.session;
    try {
      var response = await fetch(root + "api/v1/answers/" + encodeURIComponent(answerId) + "/feedback", {
        method: "POST", credentials: "same-origin", body: JSON.stringify(payload),
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      });
      if (!response.ok) throw new AskError(await errorMessage(response));
      feedback.querySelectorAll(".thumb").forEach(function (thumb) {
        thumb.setAttribute("aria-pressed", String(thumb.value === rating));
      });
      status.textContent = t("Thanks for your feedback.");
      if (rating === "down") offerHandoff(feedback.closest("article.turn"));
    } catch (error) {
      status.textContent = error instanceof AskError ? error.message : t("Couldn't send your feedback; try again.");
    }
  });

  // ---- "Ask the course staff": hand-offs, and the staff's replies

  var HANDOFFS = "bookchat:handoffs:" + book;
  var HANDOFFS_KEPT = 20;  // the newest; each is one status request per visit
  var RECHECK_MS = 120000;  // while a hand-off waits and the page is open
  var TOKEN = /^[A-Za-z0-9_-]{16,64}$/;
  var recheck = null;
  var lastStatus = {};

  function storedHandoffs() {
    try {
      var list = JSON.parse(window.localStorage.getItem(HANDOFFS) || "[]");
      return Array.isArray(list) ? list.filter(function (entry) {
        return entry && TOKEN.test(entry.token) && typeof entry.answer_id === "string";
      }) : [];
    } catch (ignored) {
      return [];  // storage off or unreadable: nothing kept, the status links still work
    }
  }

  function storeHandoffs(list) {
    try { window.localStorage.setItem(HANDOFFS, JSON.stringify(list.slice(-HANDOFFS_KEPT))); } catch (ignored) { /* off */ }
  }

  function keepHandoff(token, answerId) {
    var list = storedHandoffs().filter(function (entry) { return entry.token !== token; });
    list.push({ token: token, answer_id: answerId, at: new Date().toISOString() });
    storeHandoffs(list);
  }

  function forgetHandoff(token) {
    storeHandoffs(storedHandoffs().filter(function (entry) { return entry.token !== token; }));
  }

  /* The status URL's page block for `token`, "gone" when there is no such hand-off (any more), null on failure. */
  async function handoffStatus(token) {
    var response = await fetch(root + "api/v1/handoffs/" + encodeURIComponent(token),
                               { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (response.status === 404) return "gone";
    if (!response.ok) return null;
    var doc = new DOMParser().parseFromString(await response.text(), "text/html");
    var block = doc.querySelector("section.handoff-status");
    return block ? document.importNode(block, true) : null;
  }

  function staffList() {
    var section = document.getElementById("staff-questions");
    if (!section) {
      section = element("section", "staff-questions");
      section.id = "staff-questions";
      section.setAttribute("aria-labelledby", "staff-questions-title");
      var title = element("h2", "", t("Your questions to the course staff"));
      title.id = "staff-questions-title";
      section.appendChild(title);
      section.appendChild(element("ol"));
      conversation.parentNode.insertBefore(section, conversation);
    }
    return section.querySelector("ol");
  }

  /* Show a hand-off's status block: in place of an earlier one, else under its answer (in place of the form),
   * else in the list of the reader's questions to the staff. */
  function showStatus(entry, block) {
    block.dataset.token = entry.token;
    var earlier = Array.prototype.find.call(document.querySelectorAll(".handoff-status"), function (node) {
      return node.dataset.token === entry.token;
    });
    var turn = document.getElementById("answer-" + entry.answer_id);
    if (earlier) {
      earlier.replaceWith(block);
    } else if (turn && conversation.contains(turn)) {
      var form = turn.querySelector("details.handoff");
      if (form) form.replaceWith(block);
      else turn.querySelector(".answer").appendChild(block);
    } else {
      var item = element("li");
      item.appendChild(block);
      staffList().appendChild(item);
    }
    return block;
  }

  async function showHandoffs() {
    var entries = storedHandoffs();
    var blocks = await Promise.all(entries.map(function (entry) {
      return handoffStatus(entry.token).catch(function () { return null; });
    }));
    var waiting = false;
    entries.forEach(function (entry, i) {
      var block = blocks[i];
      if (block === "gone") return forgetHandoff(entry.token);  // removed with the audit trail's old records
      if (!block) return;
      showStatus(entry, block);
      var now = block.dataset.status;
      if (lastStatus[entry.token] === "open" && now !== "open") {
        announce(t("The course staff replied to your question: {status}.",
          { status: block.querySelector(".handoff-title").textContent.replace(/\s+/g, " ").trim() }));
      }
      lastStatus[entry.token] = now;
      if (now === "open") waiting = true;
    });
    window.clearTimeout(recheck);
    if (waiting) recheck = window.setTimeout(showHandoffs, RECHECK_MS);
  }

  /* A voted-down answer: "Ask the course staff" stands out, as under a refusal. */
  function offerHandoff(turn) {
    var details = turn && turn.querySelector("details.handoff");
    if (!details || details.classList.contains("prominent")) return;
    details.classList.add("prominent");
    details.querySelector("summary").textContent = t("Not what you needed? Ask the course staff");
  }

  conversation.addEventListener("input", function (event) {
    var note = event.target;
    if (!note.matches || !note.matches(".handoff-form textarea[name=note]")) return;
    note.form.querySelector(".handoff-count").textContent =
      t("{n} of {max} characters", { n: note.value.length, max: note.dataset.max });
  });

  conversation.addEventListener("submit", async function (event) {
    var form = event.target.closest("form.handoff-form");
    if (!form) return;
    event.preventDefault();
    var answerId = form.closest("article.turn").dataset.answerId;
    var status = form.querySelector(".handoff-form-status");
    var send = form.querySelector("button[type=submit]");
    var payload = { note: form.elements.note.value.trim() };
    var email = form.elements.contact_email;
    if (email && email.value.trim()) payload.contact_email = email.value.trim();
    send.disabled = true;
    status.textContent = t("Sending…");
    try {
      var response = await fetch(root + "api/v1/answers/" + encodeURIComponent(answerId) + "/handoff", {
        method: "POST", credentials: "same-origin", body: JSON.stringify(payload),
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      });
      if (!response.ok) throw new AskError(await errorMessage(response, "hand-offs"));
      var token = String((await response.json()).status_url || "").split("?")[0].split("/").pop();
      if (!TOKEN.test(token)) throw new AskError(t("The server's answer couldn't be read; please try again."));
      keepHandoff(token, answerId);
      lastStatus[token] = "open";
      var block = await handoffStatus(token).catch(function () { return null; });
      if (block && block !== "gone") {
        var title = showStatus({ token: token, answer_id: answerId }, block).querySelector(".handoff-title");
        title.tabIndex = -1;  // focus follows the form, which is gone
        title.focus();
      } else {
        status.textContent = t("Sent to the course staff. Their reply will show here.");
      }
      announce(t("Sent to the course staff. Their reply will show under this answer."));
    } catch (error) {
      status.textContent = error instanceof AskError ? error.message : t("Couldn't send it; please try again.");
    } finally {
      send.disabled = false;
    }
  });

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") showHandoffs();
  });
  if (storedHandoffs().length) showHandoffs();

  // "/" jumps to the search box, as on most documentation sites (not while typing in a field).
  var searchBox = document.getElementById("search-box");
  document.addEventListener("keydown", function (event) {
    if (!searchBox || event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
    var target = event.target;
    if (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) return;
    event.preventDefault();
    searchBox.focus();
    searchBox.select();
  });

  // Searches from here say they report the section the reader opens, and do: the coverage gaps count the
  // searches nothing was opened from (without this script the page reports nothing, and says so by omission).
  var searchForm = document.getElementById("search-form");
  if (searchForm) {
    var reports = document.createElement("input");
    reports.type = "hidden";
    reports.name = "report_opens";
    reports.value = "true";
    searchForm.appendChild(reports);
  }
  var searchResults = document.getElementById("search-results");
  function reportOpened(event) {
    var link = event.target.closest && event.target.closest("a[data-n]");
    var list = link && link.closest("[data-search-id]");
    if (!list || (event.type === "auxclick" && event.button !== 1)) return;
    fetch(root + "api/v1/search/" + encodeURIComponent(list.dataset.searchId) + "/opened?n=" +
          encodeURIComponent(link.dataset.n), { method: "POST", credentials: "same-origin", keepalive: true,
                                                headers: { "X-CSRFToken": csrf } }).catch(function () {});
  }
  if (searchResults) {
    searchResults.addEventListener("click", reportOpened);
    searchResults.addEventListener("auxclick", reportOpened);
  }

  // ---- "My data": this browser's conversations (the page session's, added by the server) and hand-offs

  var myData = document.getElementById("my-data");
  if (myData) {
    myData.hidden = false;
    myData.addEventListener("click", async function (event) {
      var action = event.target.dataset && event.target.dataset.myData;
      if (!action) return;
      var status = myData.querySelector(".my-data-status");
      if (action === "erase" && !window.confirm(t("Delete your conversations and questions to the course staff from bookchat? " +
          "This can't be undone."))) return;
      var tokens = storedHandoffs().map(function (entry) { return entry.token; });
      try {
        var response = await fetch(root + "api/v1/my-data" + (action === "erase" ? "/erase" : ""), {
          method: "POST", credentials: "same-origin", body: JSON.stringify({ handoff_tokens: tokens }),
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
        });
        if (!response.ok) throw new AskError(await errorMessage(response));
        var body = await response.json();
        if (action === "download") {
          var link = document.createElement("a");
          link.href = URL.createObjectURL(new Blob([JSON.stringify(body, null, 2)], { type: "application/json" }));
          link.download = "bookchat-my-data.json";
          link.click();
          status.textContent = t("Downloaded.");
        } else {
          storeHandoffs([]);
          status.textContent = t("Deleted: {conversations} conversation(s), {handoffs} question(s) to the course staff.",
            { conversations: body.conversations, handoffs: body.handoffs });
        }
      } catch (error) {
        status.textContent = error instanceof AskError ? error.message : t("Couldn't reach bookchat; try again.");
      }
    });
  }
})();

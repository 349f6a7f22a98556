/* The course staff's answer fields in the admin (a reply to a hand-off, a staff answer; templates/admin/audit/
 * _answer_fields.html): a search over the book's sections as you type, whose pick adds the section to the citations
 * (one a line, the nth line is [n]), and a preview of the answer as the student reads it, rendered and sanitised by
 * the server (audit.handoff_admin: the answers' own renderer), updated as you type once shown.
 *
 * Without this script the page still works: citations are pasted as section URLs, and Preview posts the form.
 * Loaded from static files (the admin's Content-Security-Policy allows no inline script); book text is put on the
 * page as text, and only the server's sanitised preview as HTML. */
(function () {
  "use strict";

  var SEARCH_DELAY_MS = 150;
  var PREVIEW_DELAY_MS = 500;

  function debounce(fn, ms) {
    var timer = null;
    return function () {
      var args = arguments;
      clearTimeout(timer);
      timer = setTimeout(function () { fn.apply(null, args); }, ms);
    };
  }

  function csrfToken(form) {
    var input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function citationLines(textarea) {
    return textarea.value.split(/\r?\n/).map(function (line) { return line.trim(); })
      .filter(function (line) { return line; });
  }

  function Picker(root) {
    this.root = root;
    this.url = root.getAttribute("data-sections-url");
    this.citations = document.getElementById(root.getAttribute("data-citations"));
    this.input = root.querySelector("input[role=combobox]");
    this.list = root.querySelector("[role=listbox]");
    this.status = root.querySelector("[role=status]");
    this.found = [];
    this.active = -1;
    this.asked = 0;
    root.hidden = false;
    this.input.addEventListener("input", debounce(this.search.bind(this), SEARCH_DELAY_MS));
    this.input.addEventListener("keydown", this.key.bind(this));
    this.input.addEventListener("blur", function () { setTimeout(this.close.bind(this), 200); }.bind(this));
  }

  Picker.prototype.search = function () {
    var query = this.input.value.trim();
    var asked = ++this.asked;
    if (query.length < 2) {
      this.show([]);
      return;
    }
    fetch(this.url + "?q=" + encodeURIComponent(query), {credentials: "same-origin",
                                                          headers: {"Accept": "application/json"}})
      .then(function (response) { return response.ok ? response.json() : {sections: []}; })
      .then(function (data) {
        if (asked === this.asked) {  // an answer to an older query is dropped
          this.show(data.sections || []);
          this.status.textContent = data.sections && data.sections.length
            ? data.sections.length + " section" + (data.sections.length === 1 ? "" : "s") + " found"
            : "No section found";
        }
      }.bind(this))
      .catch(function () { this.status.textContent = "The search failed; paste a section's URL instead."; }.bind(this));
  };

  Picker.prototype.show = function (sections) {
    this.found = sections;
    this.active = -1;
    this.list.textContent = "";
    sections.forEach(function (section, i) {
      var option = document.createElement("li");
      option.id = this.list.id + "-" + i;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", "false");
      option.className = "bookchat-section-option";
      var title = document.createElement("span");
      title.className = "bookchat-section-title";
      title.textContent = section.heading_path;
      var where = document.createElement("span");
      where.className = "bookchat-section-where";
      where.textContent = " (" + section.page + (section.matched === "text" ? ", from its text" : "") + ")";
      option.appendChild(title);
      option.appendChild(where);
      if (section.snippet) {
        var snippet = document.createElement("span");
        snippet.className = "bookchat-section-snippet";
        snippet.textContent = section.snippet;
        option.appendChild(snippet);
      }
      option.addEventListener("mousedown", function (event) {
        event.preventDefault();  // the input keeps focus
        this.pick(i);
      }.bind(this));
      this.list.appendChild(option);
    }, this);
    this.list.hidden = sections.length === 0;
    this.input.setAttribute("aria-expanded", sections.length ? "true" : "false");
    this.input.removeAttribute("aria-activedescendant");
  };

  Picker.prototype.move = function (step) {
    if (!this.found.length) return;
    this.active = (this.active + step + this.found.length) % this.found.length;
    Array.prototype.forEach.call(this.list.children, function (option, i) {
      option.setAttribute("aria-selected", i === this.active ? "true" : "false");
      option.classList.toggle("active", i === this.active);
    }, this);
    var option = this.list.children[this.active];
    this.input.setAttribute("aria-activedescendant", option.id);
    option.scrollIntoView({block: "nearest"});
  };

  Picker.prototype.key = function (event) {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      this.move(event.key === "ArrowDown" ? 1 : -1);
    } else if (event.key === "Enter") {
      event.preventDefault();  // never submits the form
      if (this.active >= 0) this.pick(this.active);
    } else if (event.key === "Escape") {
      this.close();
    }
  };

  Picker.prototype.pick = function (i) {
    var section = this.found[i];
    var lines = citationLines(this.citations);
    var n = lines.indexOf(section.ref) + 1;
    if (!n) {
      lines.push(section.ref);
      n = lines.length;
      this.citations.value = lines.join("\n");
      this.citations.dispatchEvent(new Event("input", {bubbles: true}));
    }
    this.status.textContent = "Cited as [" + n + "]: " + section.heading_path;
    this.input.value = "";
    this.close();
  };

  Picker.prototype.close = function () {
    this.show([]);
  };

  function Preview(section, form) {
    this.url = section.getAttribute("data-preview-url");
    this.body = section.querySelector(".bookchat-preview-body");
    this.error = section.querySelector(".bookchat-preview-error");
    this.form = form;
    this.answer = form.querySelector("textarea[name=answer]");
    this.citations = form.querySelector("textarea[name=citations]");
    this.shown = !!section.querySelector(".bookchat-preview-body > :not(.quiet)");
    var button = form.querySelector(".bookchat-preview-button");
    if (button) {
      button.addEventListener("click", function (event) {
        event.preventDefault();  // shown in place; without this script the button posts the form
        this.shown = true;
        this.update();
      }.bind(this));
    }
    var later = debounce(function () { if (this.shown) this.update(); }.bind(this), PREVIEW_DELAY_MS);
    this.answer.addEventListener("input", later);
    this.citations.addEventListener("input", later);
  }

  Preview.prototype.update = function () {
    var body = new FormData();
    body.append("answer", this.answer.value);
    body.append("citations", this.citations.value);
    fetch(this.url, {method: "POST", body: body, credentials: "same-origin",
                     headers: {"X-CSRFToken": csrfToken(this.form), "Accept": "application/json"}})
      .then(function (response) { return response.json(); })
      .then(function (data) {
        this.body.innerHTML = data.html || "";  // rendered and sanitised by the server (chat.pipeline.rendering)
        this.error.textContent = data.error || "";
        this.error.hidden = !data.error;
      }.bind(this))
      .catch(function () {
        this.error.textContent = "The preview failed; the answer is not lost.";
        this.error.hidden = false;
      }.bind(this));
  };

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll(".bookchat-citation-picker"), function (root) {
      new Picker(root);
    });
    Array.prototype.forEach.call(document.querySelectorAll(".bookchat-preview"), function (section) {
      var form = section.closest("form");
      if (form) new Preview(section, form);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();

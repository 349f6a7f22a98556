/*!
 * bookchat widget: a floating "ask the book" chat for documentation sites.
 *
 * Embed with one tag (nothing else to load, no build step, no dependencies):
 *   <script src="https://HOST/static/bookchat/widget.js" data-key="pk_…" data-book="my-book" async></script>
 * Options (data-* attributes of that tag):
 *   data-key (required)   publishable key pk_…      data-book (required)  book slug
 *   data-position         bottom-right | bottom-left data-title           panel title ("Ask the book")
 *   data-color            accent colour (any CSS colour)
 *   data-placeholder      placeholder of the question box
 *   data-api              API base URL (default: where bookchat serves this file from: https://HOST, or
 *                         https://HOST/chat for .../chat/static/bookchat/widget.js under a sub-path)
 *   data-version          the book's version to ask (default: the version of the page the reader is on, read
 *                         from its URL against the book's editions in GET /books; else the latest)
 *   data-search           on (default): Ctrl/⌘ K or / opens the search mode, unless the page handled the key;
 *                         replace: the widget's search takes over the site's own (its search button and
 *                         Ctrl/⌘ K); off: no search mode
 *   data-search-button    what "replace" takes over (a CSS selector; default: Docusaurus' DocSearch button
 *                         and any element with a data-bookchat-search attribute)
 * The reader's language (<html lang>) is sent as the question's locale: a translated book answers in it.
 * The widget's own strings are in the reader's interface language: the one chosen with its switch (kept in
 * localStorage, "bookchat:language"), else the browser's (navigator.languages), else English; the catalogue comes
 * from GET /api/v1/interface?lang=… (public, no key), with the direction the panel takes (rtl for Urdu and Arabic).
 * Changing the language builds the panel again in it; the conversation goes on (its session is kept).
 *
 * API used (every call carries ?key=pk_…, cross-origin, without cookies):
 *   GET  /api/v1/search                     sections as the reader types (the search mode), with the
 *                                           conversation's session_id once there is one
 *   POST /api/v1/search/{id}/opened?n=      which section of it the reader opened
 *   POST /api/v1/ask/stream                 Server-Sent Events: token…, then final (or error)
 *   POST /api/v1/ask                        the same answer as one JSON object (fallback without streams)
 *   POST /api/v1/answers/<id>/feedback      thumbs up/down and an optional comment
 *   GET  /api/v1/handoff-form               what "Ask the course staff" asks for (the note's limit, an e-mail?)
 *   POST /api/v1/answers/<id>/handoff       "Ask the course staff": the answer handed off, with a note
 *   GET  /api/v1/handoffs/<token>           what the staff did with it: the reply and its citations, or why not
 *   POST /api/v1/my-data                    "My data": this browser's conversation and hand-offs, downloaded
 *   POST /api/v1/my-data/erase              ... or deleted (after a confirmation), and then forgotten here too
 *   GET  /api/v1/interface?lang=            the widget's strings in the reader's language (no key)
 *
 * The conversation lives in sessionStorage (it ends with the tab); the tokens of the reader's hand-offs live in
 * localStorage, per book ("bookchat:handoffs:<book>"), so the staff's replies show after a reload and on the next
 * visit: under the answer when it is in the panel, else in "Your questions to the course staff". They are read
 * when the panel opens, when the reader comes back to the tab with it open, and every few minutes while one waits.
 * A question refused with 429 (a limit reached: a class asking at once) shows "Many questions at once — trying again
 * in N s" in the answer's place, counting down Retry-After, and is sent once more by itself; a second 429 says when
 * to try again and stops. A search refused with 429 keeps the results shown and waits Retry-After before the next.
 * An answer of the course staff (level "staff") is labelled "Answered by the course staff on DATE".
 * The panel's footer links to bookchat's privacy page (/privacy/: what it keeps, and why) and opens "My data": a
 * JSON file of what bookchat holds of the conversation and hand-offs this browser knows, or their deletion.
 *
 * Everything is rendered in a Shadow DOM on <div id="bookchat-widget">, so the host page's
 * CSS can't restyle or hide the widget and the widget's CSS can't leak into the page. The
 * only server text inserted as HTML is `answer_html` (sanitised by the server); everything
 * else goes through textContent and checked http(s) links. Elements carry stable bc-* class
 * names (and .bc-answer a data-state) for tests and for sites that want to script the widget.
 */
(function () {
  'use strict';

  if (window.BookchatWidget || document.getElementById('bookchat-widget')) return;

  var script = document.currentScript || document.querySelector('script[src*="bookchat/widget.js"]');
  var MAX_SELECTION = 2000;
  var MAX_QUESTION = 1000;
  var MAX_COMMENT = 2000;
  var CATALOGUE = {};  // msgid → the reader's language's text (GET /api/v1/interface); empty: English
  var LANGUAGE_KEY = 'bookchat:language';
  function N_(msgid) { return msgid; }  // marks a string for the catalogue; t() translates it where it is shown
  /** msgid in the reader's language, its {name}s filled from params. */
  function t(msgid, params) {
    var text = typeof CATALOGUE[msgid] === 'string' ? CATALOGUE[msgid] : msgid;
    return !params ? text : text.replace(/\{(\w+)\}/g, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(params, name) ? String(params[name]) : whole;
    });
  }
  var MESSAGES = {
    unreachable: N_("This site is not allowed to use this chat (the key doesn't allow this origin), or the chat server can't be reached."),
    cutOff: N_('The answer was cut off; please ask again.'),
    unreadable: N_("The chat server sent a response the widget couldn't read; please ask again.")
  };
  var LEVELS = { high: N_('High confidence'), medium: N_('Medium confidence'), unsure: N_('Not sure'),
    low: N_('Low confidence') };
  var REFUSALS = { not_covered: N_('Not covered'), unanswerable: N_('Not covered'), unsure: N_('Not answered directly') };
  var SEARCH_HINT = N_('Type a few words: the sections that use them appear as you type.');
  var SEARCH_DELAY = 150;  // ms after the last keystroke
  var RETRY_CAP = 60;  // s: a 429's wait up to this is waited out and the question sent again, once; longer, said
  var HANDOFFS_KEPT = 20;  // the newest hand-offs kept per book; each is one status request when the panel opens
  var HANDOFF_RECHECK = 120000;  // ms between looks while a hand-off waits and the panel is open
  var TOKEN = /^[A-Za-z0-9_-]{16,64}$/;
  var HANDOFF_TITLES = { open: N_('Sent to the course staff'), answered: N_('Answered by the course staff'),
    declined: N_('Declined by the course staff'), coverage: N_('Noted by the course staff') };
  // "… on DATE": each title with its date, as one sentence to translate.
  var HANDOFF_DATED = { open: N_('Sent to the course staff on {date}'), answered: N_('Answered by the course staff on {date}'),
    declined: N_('Declined by the course staff on {date}'), coverage: N_('Noted by the course staff on {date}') };

  // ---------------------------------------------------------------- options

  function readOptions(tag) {
    var data = (tag && tag.dataset) || {};
    var missing = ['key', 'book'].filter(function (name) { return !(data[name] || '').trim(); });
    if (missing.length) {
      console.warn('bookchat widget: not shown, the script tag lacks ' +
        missing.map(function (n) { return 'data-' + n; }).join(' and ') +
        ' (e.g. <script src=".../bookchat/widget.js" data-key="pk_..." data-book="my-book" async>).');
      return null;
    }
    var color = (data.color || '').trim();
    return {
      key: data.key.trim(),
      book: data.book.trim(),
      position: data.position === 'bottom-left' ? 'bottom-left' : 'bottom-right',
      title: (data.title || '').trim(),  // else t('Ask the book'), once the language is known
      color: color && window.CSS && CSS.supports('color', color) ? color : null,
      placeholder: (data.placeholder || '').trim(),  // else t('Ask a question about this book')
      version: (data.version || '').trim(),
      search: ['replace', 'off'].indexOf((data.search || '').trim()) >= 0 ? data.search.trim() : 'on',
      searchButton: (data.searchButton || '').trim() || '.DocSearch-Button, [data-bookchat-search]',
      api: apiBase(data.api, tag && tag.src)
    };
  }

  function apiBase(explicit, scriptSrc) {
    var url = safeUrl(explicit);
    if (url) return (url.origin + url.pathname).replace(/\/+$/, '');
    var src = safeUrl(scriptSrc);
    if (!src) return location.origin;
    // bookchat serves this file at <root>/static/bookchat/widget.js, and the API at <root>/api/v1.
    var root = src.pathname.replace(/\/static\/bookchat\/widget\.js$/, '');
    return src.origin + (root === src.pathname ? '' : root);
  }

  // ---------------------------------------------------------------- small helpers

  function safeUrl(value) {
    if (typeof value !== 'string' || !value.trim()) return null;
    try {
      var url = new URL(value, location.href);
      return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
    } catch (e) {
      return null;
    }
  }

  /** Same-tab links for pages of this site; a new tab (without opener) for other origins. */
  function applyLinkTarget(link, url) {
    if (url.origin === location.origin) {
      link.removeAttribute('target');
    } else {
      link.target = '_blank';
      var rel = (link.getAttribute('rel') || '').split(/\s+/).filter(Boolean);
      if (rel.indexOf('noopener') < 0) rel.push('noopener');
      link.rel = rel.join(' ');
    }
  }

  function makeLink(href, text) {
    var url = safeUrl(href);
    var link = el(url ? 'a' : 'span', null, text);
    if (url) {
      link.href = url.href;
      applyLinkTarget(link, url);
    }
    return link;
  }

  /** A new element; text always goes in as textContent, attributes as attributes. */
  function el(tag, className, text, attributes) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = String(text);
    Object.keys(attributes || {}).forEach(function (name) { node.setAttribute(name, attributes[name]); });
    return node;
  }

  function button(className, text, label, attributes) {
    var node = el('button', className, text, Object.assign({ type: 'button' }, attributes));
    if (label) node.setAttribute('aria-label', label);
    return node;
  }

  /** White or near-black, whichever reads better on an "rgb(r, g, b)" background (white if unknown). */
  function textColorOn(rgb) {
    var parts = (rgb.match(/^rgba?\(([\d.]+)[ ,]+([\d.]+)[ ,]+([\d.]+)/) || []).slice(1).map(function (v) {
      var c = parseFloat(v) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    var luminance = parts.length === 3 ? 0.2126 * parts[0] + 0.7152 * parts[1] + 0.0722 * parts[2] : 0;
    return luminance > 0.36 ? '#111318' : '#fff';
  }

  function truncate(text, max) {
    return text.length > max ? text.slice(0, max - 1).trimEnd() + '…' : text;
  }

  function capitalize(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function debounce(fn, ms) {
    var timer = null;
    return function () {
      clearTimeout(timer);
      timer = setTimeout(fn, ms);
    };
  }

  function userError(message, field) {
    var error = new Error(message);
    error.userMessage = message;
    error.field = field || null;
    return error;
  }

  function isAbort(error) {
    return error && error.name === 'AbortError';
  }

  function storage(action, key, value) {
    try {
      if (action === 'get') return window.sessionStorage.getItem(key);
      if (action === 'set') window.sessionStorage.setItem(key, value);
      if (action === 'remove') window.sessionStorage.removeItem(key);
    } catch (e) { /* storage disabled or full: the session then lasts as long as the page */ }
    return null;
  }

  /** localStorage, for what outlives the conversation (the hand-offs' tokens). */
  function lasting(action, key, value) {
    try {
      if (action === 'get') return window.localStorage.getItem(key);
      if (action === 'set') window.localStorage.setItem(key, value);
      if (action === 'remove') window.localStorage.removeItem(key);
    } catch (e) { /* storage disabled or full: a hand-off's status link, shown once sent, still leads back */ }
    return null;
  }

  /** A date (ISO 8601) as the reader's language writes it ("" when it isn't one). */
  function formatDate(iso) {
    var date = new Date(iso);
    if (typeof iso !== 'string' || isNaN(date.getTime())) return '';
    var style = { year: 'numeric', month: 'long', day: 'numeric' };
    try {
      return date.toLocaleDateString(pageLanguage() || undefined, style);
    } catch (e) {
      return date.toLocaleDateString(undefined, style);
    }
  }

  // ---------------------------------------------------------------- API client

  function createApi(options) {
    function endpoint(path) {
      return options.api + path + '?key=' + encodeURIComponent(options.key);
    }

    async function post(path, body, signal) {
      try {
        return await fetch(endpoint(path), {
          method: 'POST', mode: 'cors', credentials: 'omit', signal: signal,
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body)
        });
      } catch (error) {
        // A rejected fetch is a network failure or (far more often) a 403 without CORS
        // headers: the origin isn't allowed by the key, and the browser hides the response.
        if (isAbort(error)) throw error;
        throw userError(t(MESSAGES.unreachable));
      }
    }

    async function failure(response, what) {
      var body = null;
      try { body = await response.json(); } catch (e) { /* not JSON */ }
      if (response.status === 429) {
        var seconds = retryAfter(response, body);
        var wait = seconds ? duration(seconds) : t('a moment');
        var limited = userError(what === 'searches' ? t('Too many searches; try again in {wait}.', { wait: wait })
          : what === 'hand-offs' ? t('Too many questions to the course staff; try again in {wait}.', { wait: wait })
          : t('Many questions at once — try again in {wait}.', { wait: wait }));
        limited.retryAfter = seconds || 0;
        return limited;
      }
      if (body && typeof body.message === 'string' && body.message) {
        return userError(capitalize(body.message), body.field);
      }
      return userError(t('The chat server answered with an error (HTTP {status}).', { status: response.status }));
    }

    /** Streams an answer: calls onToken(text) as it is written, resolves with the final object. */
    async function ask(payload, onToken, signal) {
      if (typeof ReadableStream === 'undefined' || typeof TextDecoder === 'undefined') {
        var plain = await post('/api/v1/ask', payload, signal);
        if (!plain.ok) throw await failure(plain);
        try { return await plain.json(); } catch (e) { throw userError(t(MESSAGES.unreadable)); }
      }
      var response = await post('/api/v1/ask/stream', payload, signal);
      if (!response.ok) throw await failure(response);
      var outcome = null;
      var parser = createSseParser(function (name, data) {
        if (outcome) return;
        if (name === 'token' && data && typeof data.text === 'string') onToken(data.text);
        else if (name === 'final') outcome = data ? { final: data } : { error: userError(t(MESSAGES.unreadable)) };
        else if (name === 'error') outcome = { error: userError((data && data.message) || t(MESSAGES.cutOff)) };
      });
      await readBody(response, parser, function () { return outcome !== null; });
      if (!outcome) throw userError(t(MESSAGES.cutOff));
      if (outcome.error) throw outcome.error;
      return outcome.final;
    }

    async function feedback(answerId, body) {
      var response = await post('/api/v1/answers/' + encodeURIComponent(answerId) + '/feedback', body);
      if (!response.ok) throw await failure(response);
      return response.json().catch(function () { return {}; });
    }

    /** Sections for a query as typed: resolves with the search result (pages with their sections). */
    async function search(params, signal) {
      var query = Object.keys(params).filter(function (name) { return params[name]; }).map(function (name) {
        return '&' + name + '=' + encodeURIComponent(params[name]);
      }).join('');
      var response;
      try {
        response = await fetch(endpoint('/api/v1/search') + query, { mode: 'cors', credentials: 'omit', signal: signal });
      } catch (error) {
        if (isAbort(error)) throw error;
        throw userError(t(MESSAGES.unreachable));
      }
      if (!response.ok) throw await failure(response, 'searches');
      try { return await response.json(); } catch (e) { throw userError(t(MESSAGES.unreadable)); }
    }

    /** Tell bookchat which section of a search the reader opened (the coverage gaps count searches whose
     *  sections nobody opened). No body and no header, so no preflight; keepalive, so it is sent while the page
     *  is left; the answer is not read, and a failure costs the reader nothing. */
    function opened(searchId, n) {
      try {
        fetch(endpoint('/api/v1/search/' + encodeURIComponent(searchId) + '/opened') + '&n=' + n,
          { method: 'POST', mode: 'no-cors', credentials: 'omit', keepalive: true }).catch(function () {});
      } catch (e) { /* an old browser without keepalive: nothing recorded */ }
    }

    async function books() {
      var response = await fetch(endpoint('/api/v1/books'), { mode: 'cors', credentials: 'omit' });
      if (!response.ok) throw await failure(response);
      return response.json();
    }

    async function get(path) {
      try {
        return await fetch(endpoint(path), { mode: 'cors', credentials: 'omit' });
      } catch (error) {
        throw userError(t(MESSAGES.unreachable));
      }
    }

    async function json(response) {
      try { return await response.json(); } catch (e) { throw userError(t(MESSAGES.unreadable)); }
    }

    /** Hand an answer to the course staff: resolves with {handoff, status_url}. */
    async function handoff(answerId, body) {
      var response = await post('/api/v1/answers/' + encodeURIComponent(answerId) + '/handoff', body);
      if (!response.ok) throw await failure(response, 'hand-offs');
      return json(response);
    }

    /** A hand-off's status; null when there is none with this token (any more: removed with old records). */
    async function handoffStatus(token) {
      var response = await get('/api/v1/handoffs/' + encodeURIComponent(token));
      if (response.status === 404) return null;
      if (!response.ok) throw await failure(response);
      return json(response);
    }

    /** What the hand-off form asks for, once per page ({} when it can't be read: the server checks anyway). */
    var formFacts = null;
    function handoffForm() {
      if (!formFacts) {
        formFacts = get('/api/v1/handoff-form').then(function (response) {
          return response.ok ? json(response) : {};
        }).catch(function () {
          formFacts = null;  // asked again next time
          return {};
        });
      }
      return formFacts;
    }

    /** "My data": everything held of the conversations and hand-offs named in ``body`` (one JSON document), or,
     *  with ``erase``, those erased (resolves with what was erased, counted). */
    async function myData(body, erase) {
      var response = await post('/api/v1/my-data' + (erase ? '/erase' : ''), body);
      if (!response.ok) throw await failure(response);
      return json(response);
    }

    return { ask: ask, feedback: feedback, books: books, search: search, opened: opened, handoff: handoff,
      handoffStatus: handoffStatus, handoffForm: handoffForm, myData: myData };
  }

  // ---------------------------------------------------------------- the page's version and language

  /** The edition of ``book`` (an entry of GET /books) that the page at ``pageUrl`` belongs to, read from its URL
   *  the way Docusaurus routes it: the edition whose URL path is the longest prefix of the page's path. */
  function editionOf(book, pageUrl) {
    if (!book || !Array.isArray(book.editions) || !Array.isArray(book.versions) || !book.versions.length) return null;
    var path = pageUrl.pathname.replace(/\/+$/, '') + '/';
    var best = null;
    var bestLength = -1;
    book.editions.forEach(function (edition) {
      var base = safeUrl(edition.base_url);
      if (!base) return;
      var prefix = base.pathname.replace(/\/+$/, '') + '/';
      if (path.indexOf(prefix) === 0 && prefix.length > bestLength) {
        best = edition;
        bestLength = prefix.length;
      }
    });
    return best;
  }

  function pageLanguage() {
    var lang = (document.documentElement.getAttribute('lang') || '').trim();
    return /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(lang) ? lang : '';
  }

  function retryAfter(response, body) {
    // Retry-After is readable cross-origin only if the server lists it in Access-Control-Expose-Headers.
    var header = response.headers.get('Retry-After');
    if (header && /^\d+$/.test(header.trim())) return Math.max(1, parseInt(header, 10));
    if (header && !isNaN(Date.parse(header))) return Math.max(1, Math.ceil((Date.parse(header) - Date.now()) / 1000));
    var match = body && typeof body.message === 'string' && body.message.match(/try again in (\d+)\s*s/);
    return match ? Math.max(1, parseInt(match[1], 10)) : null;
  }

  function duration(seconds) {
    return seconds < 120 ? t('{n} s', { n: seconds }) : t('{n} min', { n: Math.ceil(seconds / 60) });
  }

  /** Resolves after ``seconds``, calling onTick(seconds left) each second from the first; rejects with an
   *  AbortError when ``signal`` aborts (a new conversation while waiting). */
  function countDown(seconds, signal, onTick) {
    return new Promise(function (resolve, reject) {
      var end = Date.now() + seconds * 1000;
      var timer = null;
      signal.addEventListener('abort', function () {
        clearTimeout(timer);
        reject(new DOMException('The wait was cancelled.', 'AbortError'));
      });
      (function tick() {
        var left = Math.ceil((end - Date.now()) / 1000);
        if (signal.aborted) return;
        if (left <= 0) return resolve();
        onTick(left);
        timer = setTimeout(tick, Math.min(1000, end - Date.now()));
      })();
    });
  }

  async function readBody(response, parser, finished) {
    if (!response.body || !response.body.getReader) {
      parser.push(await response.text().catch(function () { return ''; }));
      parser.end();
      return;
    }
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    try {
      while (!finished()) {
        var chunk = await reader.read();
        if (chunk.done) break;
        parser.push(decoder.decode(chunk.value, { stream: true }));
      }
      parser.push(decoder.decode());
      parser.end();
    } catch (error) {
      if (isAbort(error)) throw error;
      if (!finished()) throw userError(t(MESSAGES.cutOff));
    }
    if (finished()) reader.cancel().catch(function () {});
  }

  /** Incremental text/event-stream parser: push() text as it arrives, end() at the end. */
  function createSseParser(onEvent) {
    var buffer = '';

    function dispatch(block) {
      var name = 'message';
      var data = [];
      block.split('\n').forEach(function (line) {
        if (!line || line.charAt(0) === ':') return;
        var colon = line.indexOf(':');
        var field = colon < 0 ? line : line.slice(0, colon);
        var value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') name = value;
        else if (field === 'data') data.push(value);
      });
      if (!data.length) return;
      var parsed = null;
      try { parsed = JSON.parse(data.join('\n')); } catch (e) { /* reported as unreadable */ }
      onEvent(name, parsed);
    }

    function push(text) {
      buffer += text;
      // A chunk may end between "\r" and "\n": keep a trailing "\r" until the next chunk.
      var held = buffer.slice(-1) === '\r' ? '\r' : '';
      buffer = buffer.slice(0, buffer.length - held.length).replace(/\r\n?/g, '\n');
      var boundary;
      while ((boundary = buffer.indexOf('\n\n')) >= 0) {
        dispatch(buffer.slice(0, boundary));
        buffer = buffer.slice(boundary + 2);
      }
      buffer += held;
    }

    function end() {
      var rest = buffer.replace(/\r\n?/g, '\n').trim();
      buffer = '';
      if (rest) dispatch(rest);
    }

    return { push: push, end: end };
  }

  // ---------------------------------------------------------------- styles

  // The focus ring is the accent in light; in dark, the accent is under 3:1 on the surfaces, so it is the links' blue.
  var DARK_VARS = '--bc-focus:#8ab4ff;--bc-bg:#1c1d21;--bc-fg:#e8e9ec;--bc-muted:#a3a7b0;--bc-border:#33363d;' +
    '--bc-surface:#25272c;--bc-shadow:0 12px 40px rgba(0,0,0,.55);--bc-link:#8ab4ff;' +
    '--bc-code-comment:#8b949e;--bc-code-keyword:#ff7b72;--bc-code-string:#a5d6ff;--bc-code-number:#79c0ff;' +
    '--bc-code-function:#d2a8ff;--bc-code-tag:#7ee787;--bc-code-builtin:#ffa657;' +
    '--bc-high:#7ee2a8;--bc-high-bg:#16392a;--bc-medium:#f5d37a;--bc-medium-bg:#3d3214;' +
    '--bc-low:#ffb0a6;--bc-low-bg:#47201c;--bc-note-bg:#2d2a1f;';
  var CSS_TEXT = [
    ':host{all:initial !important;display:block !important;position:static !important;}',
    '[hidden]{display:none !important;}',
    '.bc-root{--bc-focus:var(--bc-accent);--bc-on-accent:#fff;--bc-bg:#fff;--bc-fg:#1c1e21;--bc-muted:#5f6470;--bc-border:#e2e4e8;--bc-surface:#f5f6f8;',
    '--bc-shadow:0 12px 40px rgba(20,24,40,.18);--bc-link:var(--bc-accent);--bc-high:#146c3a;--bc-high-bg:#e3f5ea;',
    '--bc-medium:#7a5500;--bc-medium-bg:#fdf1d6;--bc-low:#a3281b;--bc-low-bg:#fde6e3;--bc-note-bg:#fbf7ea;',
    '--bc-code-comment:#59636e;--bc-code-keyword:#cf222e;--bc-code-string:#0a3069;--bc-code-number:#0550ae;',
    '--bc-code-function:#8250df;--bc-code-tag:#116329;--bc-code-builtin:#953800;',
    'font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;font-size:14px;',
    'line-height:1.5;color:var(--bc-fg);font-weight:400;font-style:normal;letter-spacing:normal;text-align:start;',
    'text-transform:none;visibility:visible;direction:ltr;-webkit-font-smoothing:antialiased;}',
    ".bc-root[dir=rtl]{direction:rtl;}",  // the reader's language (Urdu, Arabic): mirrored by logical properties
    '.bc-root.bc-dark{' + DARK_VARS + '}',
    '@media (prefers-color-scheme:dark){.bc-root{' + DARK_VARS + '}}',
    '*,*::before,*::after{box-sizing:border-box;}',
    'button,textarea{margin:0;font:inherit;color:inherit;}',
    'button{cursor:pointer;background:none;border:0;padding:0;}',
    ':focus-visible{outline:2px solid var(--bc-focus);outline-offset:2px;}',
    'a{color:var(--bc-link);text-decoration:underline;text-underline-offset:2px;}',
    '.bc-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap;}',
    // launcher
    '.bc-launcher{position:fixed;bottom:20px;right:20px;z-index:2147483000;width:56px;height:56px;',
    'border-radius:50%;background:var(--bc-accent);color:var(--bc-on-accent);display:flex;align-items:center;',
    'justify-content:center;box-shadow:0 6px 20px rgba(0,0,0,.25);transition:transform .15s ease;}',
    '.bc-launcher:hover{transform:scale(1.06);}',
    '.bc-launcher svg{width:26px;height:26px;fill:none;stroke:currentColor;stroke-width:2;stroke-linecap:round;stroke-linejoin:round;}',
    '.bc-launcher .bc-icon-close,.bc-launcher[aria-expanded="true"] .bc-icon-chat{display:none;}',
    '.bc-launcher[aria-expanded="true"] .bc-icon-close{display:block;}',
    '.bc-left .bc-launcher{right:auto;left:20px;}',
    // panel
    '.bc-panel{position:fixed;bottom:88px;right:20px;z-index:2147483001;width:390px;',
    'height:min(640px,calc(100vh - 112px));display:flex;flex-direction:column;background:var(--bc-bg);',
    'border:1px solid var(--bc-border);border-radius:14px;box-shadow:var(--bc-shadow);overflow:hidden;}',
    '.bc-left .bc-panel{right:auto;left:20px;}',
    '.bc-header{display:flex;align-items:center;gap:8px;padding:12px 12px 12px 16px;',
    'border-bottom:1px solid var(--bc-border);}',
    '.bc-heading{flex:1;min-width:0;}',
    '.bc-title{margin:0;font-size:16px;font-weight:650;line-height:1.3;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;}',
    '.bc-subtitle{margin:0;font-size:12px;color:var(--bc-muted);white-space:nowrap;overflow:hidden;text-overflow:ellipsis;}',
    '.bc-new{font-size:12.5px;padding:5px 10px;border:1px solid var(--bc-border);border-radius:999px;white-space:nowrap;}',
    '.bc-new:hover,.bc-close:hover{background:var(--bc-surface);}',
    '.bc-close{width:32px;height:32px;border-radius:8px;font-size:22px;line-height:1;color:var(--bc-muted);}',
    '.bc-log{flex:1;overflow-y:auto;padding:16px;display:flex;flex-direction:column;gap:14px;overscroll-behavior:contain;}',
    '.bc-empty{margin:auto 0;text-align:center;color:var(--bc-muted);padding:12px;}',
    '.bc-empty strong{display:block;color:var(--bc-fg);font-weight:600;font-size:15px;margin-bottom:4px;}',
    '.bc-question{align-self:flex-end;max-width:85%;background:var(--bc-accent);color:var(--bc-on-accent);padding:8px 12px;',
    'border-radius:14px 14px 4px 14px;white-space:pre-wrap;overflow-wrap:anywhere;}',
    '.bc-question-quote{display:block;font-size:12.5px;opacity:.85;border-inline-start:2px solid currentColor;',
    'padding-inline-start:8px;margin-bottom:4px;}',
    '.bc-answer{align-self:stretch;display:flex;flex-direction:column;gap:10px;}',
    '.bc-answer-text{overflow-wrap:anywhere;}',
    '.bc-answer[data-state="streaming"] .bc-answer-text{white-space:pre-wrap;}',
    '.bc-answer-text>:first-child{margin-top:0;}.bc-answer-text>:last-child{margin-bottom:0;}',
    '.bc-answer-text p,.bc-answer-text ul,.bc-answer-text ol,.bc-answer-text pre,.bc-answer-text blockquote,',
    '.bc-answer-text table{margin:0 0 10px;}',
    '.bc-answer-text ul,.bc-answer-text ol{padding-inline-start:22px;}',
    '.bc-answer-text code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;',
    'background:var(--bc-surface);padding:1px 4px;border-radius:4px;}',
    '.bc-answer-text pre{background:var(--bc-surface);padding:10px;border-radius:8px;overflow-x:auto;}',
    '.bc-answer-text pre code{padding:0;background:none;}',
    // code blocks (chat/pipeline/rendering.py): caption, Pygments' classes, copy button
    '.bc-answer-text .bookchat-code{position:relative;margin:0 0 10px;}',
    '.bc-answer-text .bookchat-code pre{margin:0;line-height:1.45;}',
    '.bookchat-code-title{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:11.5px;',
    'color:var(--bc-muted);background:var(--bc-surface);border-bottom:1px solid var(--bc-border);padding:4px 10px;',
    'border-radius:8px 8px 0 0;}',
    '.bc-answer-text .bookchat-code-title+pre{border-radius:0 0 8px 8px;}',
    '.bc-copy{position:absolute;top:4px;inset-inline-end:4px;font-size:11.5px;padding:2px 8px;border-radius:6px;',
    'border:1px solid var(--bc-border);background:var(--bc-bg);color:var(--bc-fg);}',
    '.bc-answer-text pre span[class^="c"]{color:var(--bc-code-comment);font-style:italic;}',
    '.bc-answer-text pre span[class^="k"],.bc-answer-text pre span.ow{color:var(--bc-code-keyword);}',
    '.bc-answer-text pre span[class^="s"],.bc-answer-text pre span.dl{color:var(--bc-code-string);}',
    '.bc-answer-text pre span[class^="m"],.bc-answer-text pre span.il,.bc-answer-text pre span.na{color:var(--bc-code-number);}',
    '.bc-answer-text pre span.nf,.bc-answer-text pre span.nc,.bc-answer-text pre span.nd{color:var(--bc-code-function);}',
    '.bc-answer-text pre span.nt,.bc-answer-text pre span.gi{color:var(--bc-code-tag);}',
    '.bc-answer-text pre span.nb,.bc-answer-text pre span.bp,.bc-answer-text pre span.gd{color:var(--bc-code-builtin);}',
    '.bc-answer-text pre span.gp{color:var(--bc-code-comment);user-select:none;}',
    '.bookchat-math{font-family:"Latin Modern Math","STIX Two Math",Cambria,serif;white-space:pre-wrap;}',
    '.bc-answer-text blockquote{border-inline-start:3px solid var(--bc-border);padding-inline-start:10px;color:var(--bc-muted);}',
    '.bc-answer-text table{border-collapse:collapse;display:block;overflow-x:auto;}',
    '.bc-answer-text th,.bc-answer-text td{border:1px solid var(--bc-border);padding:4px 8px;}',
    '.bc-answer-text a.bookchat-cite{font-size:11.5px;font-weight:600;text-decoration:none;vertical-align:super;',
    'line-height:1;padding:0 1px;}',
    '.bc-typing{display:inline-flex;gap:4px;padding:6px 0;}',
    '.bc-dot{width:7px;height:7px;border-radius:50%;background:var(--bc-muted);animation:bc-blink 1.2s infinite;}',
    '.bc-dot:nth-child(2){animation-delay:.2s;}.bc-dot:nth-child(3){animation-delay:.4s;}',
    '@keyframes bc-blink{0%,80%,100%{opacity:.25;}40%{opacity:1;}}',
    '@media (prefers-reduced-motion:reduce){.bc-dot{animation:none;opacity:.6;}.bc-launcher{transition:none;}}',
    '.bc-meta{display:flex;flex-wrap:wrap;gap:6px;align-items:center;}',
    '.bc-badge{display:inline-flex;align-items:center;gap:6px;font-size:12px;font-weight:600;padding:2px 10px;',
    'border-radius:999px;}',
    '.bc-badge::before{content:"";width:7px;height:7px;border-radius:50%;background:currentColor;}',
    '.bc-badge[data-level="high"]{color:var(--bc-high);background:var(--bc-high-bg);}',
    '.bc-badge[data-level="medium"]{color:var(--bc-medium);background:var(--bc-medium-bg);}',
    '.bc-badge[data-level="low"],.bc-badge[data-level="unsure"]{color:var(--bc-low);background:var(--bc-low-bg);}',
    '.bc-badge[data-level="none"]{color:var(--bc-muted);background:var(--bc-surface);}',
    '.bc-level-note{font-size:12px;color:var(--bc-muted);}',
    '.bc-disclaimer,.bc-notice{margin:0;font-size:12.5px;padding:8px 10px;border-radius:8px;background:var(--bc-note-bg);',
    'border:1px solid var(--bc-border);}',
    '.bc-section-title{margin:0 0 6px;font-size:12px;font-weight:600;color:var(--bc-muted);text-transform:uppercase;',
    'letter-spacing:.04em;}',
    '.bc-sources ol,.bc-suggestions ul{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:6px;}',
    '.bc-source{padding:8px 10px;border:1px solid var(--bc-border);border-radius:8px;background:var(--bc-surface);}',
    '.bc-source a{font-weight:600;font-size:13px;text-decoration:none;}',
    '.bc-source a:hover,.bc-suggestions a:hover{text-decoration:underline;}',
    '.bc-excerpt{margin:4px 0 0;font-size:12.5px;color:var(--bc-muted);display:-webkit-box;-webkit-line-clamp:3;',
    '-webkit-box-orient:vertical;overflow:hidden;overflow-wrap:anywhere;}',
    '.bc-suggestions a{font-size:13px;}',
    '.bc-feedback{display:flex;flex-wrap:wrap;align-items:center;gap:6px;font-size:12.5px;color:var(--bc-muted);}',
    '.bc-thumb-up,.bc-thumb-down{width:30px;height:28px;border:1px solid var(--bc-border);border-radius:8px;',
    'display:inline-flex;align-items:center;justify-content:center;color:var(--bc-muted);}',
    '.bc-feedback svg{width:16px;height:16px;fill:none;stroke:currentColor;stroke-width:1.8;stroke-linejoin:round;}',
    '.bc-thumb-down svg{transform:rotate(180deg);}',
    '.bc-thumb-up:hover,.bc-thumb-down:hover{background:var(--bc-surface);}',
    '.bc-feedback [aria-pressed="true"]{border-color:var(--bc-accent);background:var(--bc-surface);',
    'box-shadow:inset 0 0 0 1px var(--bc-accent);}',
    '.bc-feedback button:disabled{opacity:.6;cursor:default;}',
    '.bc-comment{flex-basis:100%;display:flex;gap:6px;align-items:flex-end;}',
    '.bc-comment textarea{flex:1;min-height:36px;resize:vertical;}',
    '.bc-comment-send{padding:6px 10px;border-radius:8px;border:1px solid var(--bc-border);color:var(--bc-fg);',
    'font-size:12.5px;white-space:nowrap;}',
    // "Ask the course staff" under an answer, and what the staff did with it
    '.bc-badge[data-level="staff"]{color:var(--bc-high);background:var(--bc-high-bg);}',
    '.bc-handoff{font-size:12.5px;}',
    '.bc-handoff-prominent{padding:8px 10px;border:1px solid var(--bc-border);border-inline-start:3px solid var(--bc-accent);',
    'border-radius:8px;background:var(--bc-surface);}',
    '.bc-handoff-open{color:var(--bc-link);text-decoration:underline;text-underline-offset:2px;text-align:start;}',
    '.bc-handoff-prominent .bc-handoff-open{font-weight:600;font-size:13px;}',
    '.bc-handoff-form{display:flex;flex-direction:column;gap:6px;margin-top:8px;}',
    '.bc-handoff-form label{font-weight:600;}',
    '.bc-handoff-about,.bc-handoff-count{margin:0;font-size:12px;color:var(--bc-muted);}',
    '.bc-handoff-note{min-height:64px;resize:vertical;}',
    '.bc-handoff-email{display:block;width:100%;border:1px solid var(--bc-border);border-radius:10px;padding:7px 11px;',
    'background:var(--bc-bg);color:var(--bc-fg);font:inherit;}',
    '.bc-handoff-email:focus-visible{outline:2px solid var(--bc-focus);outline-offset:0;border-color:transparent;}',
    '.bc-handoff-send{align-self:flex-start;padding:6px 12px;border-radius:8px;background:var(--bc-accent);',
    'color:var(--bc-on-accent);font-weight:600;}',
    '.bc-handoff-send:disabled{opacity:.55;cursor:default;}',
    '.bc-handoff-form-status{margin:0;}.bc-handoff-form-status:empty{display:none;}',
    '.bc-handoff-status{display:flex;flex-direction:column;gap:8px;padding:10px 12px;border:1px solid var(--bc-border);',
    'border-inline-start:3px solid var(--bc-high);border-radius:8px;overflow-wrap:anywhere;}',
    '.bc-handoff-status[data-status="open"]{border-inline-start-color:var(--bc-accent);}',
    '.bc-handoff-status[data-status="declined"]{border-inline-start-color:var(--bc-muted);}',
    '.bc-handoff-status>p{margin:0;}',
    '.bc-handoff-title{font-weight:650;font-size:13.5px;}',
    '.bc-handoff-label{display:block;font-size:11.5px;font-weight:600;color:var(--bc-muted);text-transform:uppercase;',
    'letter-spacing:.04em;}',
    '.bc-handoff-text{white-space:pre-wrap;}',
    '.bc-answer .bc-handoff-question{display:none;}',
    '.bc-handoff-link{font-size:12.5px;}',
    '.bc-staff{display:flex;flex-direction:column;gap:8px;}',
    '.bc-staff-title{margin:0;font-size:13px;font-weight:650;}',
    '.bc-staff-list{list-style:none;margin:0;padding:0;display:flex;flex-direction:column;gap:8px;}',
    // the footer: the privacy page and "My data"
    '.bc-footer{border-top:1px solid var(--bc-border);padding:6px 12px;display:flex;flex-direction:column;gap:6px;',
    'font-size:12px;color:var(--bc-muted);}',
    '.bc-footer-row{display:flex;gap:12px;align-items:center;}',
    '.bc-footer-row a{color:var(--bc-muted);}',
    '.bc-language-select{font:inherit;font-size:12px;color:var(--bc-fg);background:var(--bc-bg);',
    'border:1px solid var(--bc-border);border-radius:6px;padding:1px 4px;max-width:9em;}',
    '.bc-my-data-open{color:var(--bc-muted);text-decoration:underline;text-underline-offset:2px;}',
    '.bc-my-data{display:flex;flex-wrap:wrap;gap:6px;align-items:center;}',
    '.bc-my-data p{margin:0;flex-basis:100%;}',
    '.bc-my-data-download,.bc-my-data-erase{padding:4px 10px;border:1px solid var(--bc-border);border-radius:999px;',
    'color:var(--bc-fg);white-space:nowrap;}',
    '.bc-my-data-download:hover,.bc-my-data-erase:hover{background:var(--bc-surface);}',
    '.bc-my-data button:disabled{opacity:.55;cursor:default;}',
    '.bc-my-data-status{flex-basis:100%;color:var(--bc-fg);}.bc-my-data-status:empty{display:none;}',
    '.bc-error{margin:0;padding:10px 12px;border-radius:8px;color:var(--bc-low);background:var(--bc-low-bg);',
    'border:1px solid currentColor;font-size:13px;}',
    // form
    '.bc-form{border-top:1px solid var(--bc-border);padding:10px 12px 12px;display:flex;flex-direction:column;gap:8px;}',
    '.bc-selection{display:flex;align-items:center;gap:8px;font-size:12.5px;padding:6px 6px 6px 10px;',
    'background:var(--bc-surface);border-inline-start:3px solid var(--bc-accent);border-radius:6px;}',
    '.bc-selection-text{flex:1;min-width:0;color:var(--bc-muted);overflow-wrap:anywhere;}',
    '.bc-selection-remove{width:24px;height:24px;border-radius:6px;font-size:16px;line-height:1;color:var(--bc-muted);}',
    '.bc-row{display:flex;gap:8px;align-items:flex-end;}',
    'textarea{display:block;width:100%;border:1px solid var(--bc-border);border-radius:10px;padding:9px 11px;',
    'background:var(--bc-bg);color:var(--bc-fg);resize:none;line-height:1.4;}',
    'textarea::placeholder{color:var(--bc-muted);opacity:1;}',
    'textarea:focus-visible{outline:2px solid var(--bc-focus);outline-offset:0;border-color:transparent;}',
    '.bc-input{flex:1;min-height:40px;max-height:140px;}',
    '.bc-send{height:40px;padding:0 16px;border-radius:10px;background:var(--bc-accent);color:var(--bc-on-accent);font-weight:600;}',
    '.bc-send:disabled{opacity:.55;cursor:default;}',
    '.bc-hint{margin:0;font-size:11.5px;color:var(--bc-muted);}',
    // search mode (an ARIA combobox: the box, and a listbox of sections)
    '.bc-modes{display:flex;gap:4px;}',
    '.bc-mode{font-size:12.5px;padding:5px 10px;border:1px solid var(--bc-border);border-radius:999px;white-space:nowrap;}',
    '.bc-mode[aria-pressed="true"]{background:var(--bc-accent);color:var(--bc-on-accent);border-color:var(--bc-accent);}',
    '.bc-search{flex:1;display:flex;flex-direction:column;min-height:0;}',
    '.bc-search-row{padding:12px 12px 8px;}',
    '.bc-search-input{display:block;width:100%;border:1px solid var(--bc-border);border-radius:10px;padding:9px 11px;',
    'background:var(--bc-bg);color:var(--bc-fg);font:inherit;}',
    '.bc-search-input::placeholder{color:var(--bc-muted);opacity:1;}',
    '.bc-search-input:focus-visible{outline:2px solid var(--bc-focus);outline-offset:0;border-color:transparent;}',
    '.bc-search-status{margin:0;padding:0 14px 6px;font-size:12px;color:var(--bc-muted);}',
    '.bc-results{list-style:none;margin:0;padding:0 8px 8px;overflow-y:auto;flex:1;overscroll-behavior:contain;',
    'position:relative;}',
    '.bc-result{padding:8px 10px;border-radius:8px;cursor:pointer;border:1px solid transparent;}',
    '.bc-result[aria-selected="true"]{border-color:var(--bc-accent);background:var(--bc-surface);}',
    '.bc-result-page{display:block;font-size:11.5px;color:var(--bc-muted);}',
    '.bc-result-title{display:block;font-weight:600;color:var(--bc-link);text-decoration:underline;',
    'text-underline-offset:2px;}',
    '.bc-result-snippet{display:block;font-size:12.5px;overflow-wrap:anywhere;}',
    '.bc-result mark{background:var(--bc-mark-bg,#fff1a8);color:var(--bc-mark-fg,#1c1e21);border-radius:2px;padding:0 1px;}',
    '.bc-dark .bc-result mark{--bc-mark-bg:#5c4a00;--bc-mark-fg:#fff8d6;}',
    '@media (prefers-color-scheme:dark){.bc-result mark{--bc-mark-bg:#5c4a00;--bc-mark-fg:#fff8d6;}}',
    '.bc-search-actions{border-top:1px solid var(--bc-border);padding:8px 12px;display:flex;gap:8px;align-items:center;}',
    '.bc-ask-query{padding:6px 12px;border-radius:8px;background:var(--bc-accent);color:var(--bc-on-accent);font-weight:600;',
    'white-space:nowrap;}',
    '.bc-ask-query:disabled{opacity:.55;cursor:default;}',
    // selection bubble
    '.bc-ask-selection{position:fixed;z-index:2147483002;padding:6px 12px;border-radius:999px;font-size:13px;',
    'font-weight:600;background:var(--bc-accent);color:var(--bc-on-accent);box-shadow:0 4px 14px rgba(0,0,0,.25);white-space:nowrap;}',
    '@media (max-width:480px){',
    '.bc-panel,.bc-left .bc-panel{left:0;right:0;bottom:0;width:100%;height:92vh;height:92dvh;',
    'border-radius:14px 14px 0 0;border-width:1px 0 0;}',
    '.bc-open .bc-launcher{display:none;}.bc-hint{display:none;}.bc-launcher{bottom:16px;right:16px;}',
    '.bc-left .bc-launcher{left:16px;}}'
  ].join('\n');

  var CHAT_ICON = '<svg class="bc-icon-chat" viewBox="0 0 24 24" aria-hidden="true"><path d="M21 12a8 8 0 0 1-11.6 ' +
    '7.1L4 20.5l1.4-4.9A8 8 0 1 1 21 12z"/><path d="M8.5 10.5h7M8.5 14h4.5"/></svg>' +
    '<svg class="bc-icon-close" viewBox="0 0 24 24" aria-hidden="true"><path d="M6 6l12 12M18 6L6 18"/></svg>';
  var THUMB_ICON = '<svg viewBox="0 0 24 24" aria-hidden="true"><path d="M3 10.5h4V20H3z"/><path d="M7 10.5l3.6-7' +
    'c1.6 0 2.6 1.1 2.6 2.6v3.4h5a2 2 0 0 1 2 2.3l-1.2 6.5a2 2 0 0 1-2 1.7H7"/></svg>';

  // ---------------------------------------------------------------- the widget

  /** The widget in the reader's language (``ui``: what GET /api/v1/interface answered); ``onLanguage(code)`` when the
   * reader picks another. ``destroy`` takes it off the page, with every listener it put on the site's page. */
  function createWidget(options, ui, onLanguage) {
    var lifetime = new AbortController();
    var listening = { signal: lifetime.signal };
    var title = options.title || t('Ask the book');
    var api = createApi(options);
    var sessionKey = 'bookchat:session:' + options.book;
    var state = { sessionId: storage('get', sessionKey), selection: null, offered: null, accepted: null, request: null };
    var handoffKey = 'bookchat:handoffs:' + options.book;
    var handoffs = { last: {}, timer: null, busy: false };  // each hand-off's status as last seen
    var pageVersion = null;  // a promise of the version to ask (or ''), found once per page

    function versionToAsk() {
      if (options.version) return Promise.resolve(options.version);
      if (!pageVersion) {
        pageVersion = api.books().then(function (body) {
          var books = (body && Array.isArray(body.books)) ? body.books : [];
          var book = books.filter(function (b) { return b && b.slug === options.book; })[0];
          var edition = editionOf(book, location);
          return edition ? String(edition.version || '') : '';
        }).catch(function () { return ''; });  // no version: the latest answers
      }
      return pageVersion;
    }

    var host = el('div');
    host.id = 'bookchat-widget';
    var shadow = host.attachShadow({ mode: 'open' });
    var style = el('style', null, CSS_TEXT);
    var root = el('div', 'bc-root' + (options.position === 'bottom-left' ? ' bc-left' : ''),
      null, { lang: ui.language, dir: ui.dir });
    root.style.setProperty('--bc-accent', options.color || '#2563eb');

    var launcher = button('bc-launcher', null, t('Open chat'), { 'aria-expanded': 'false', 'aria-controls': 'bc-panel' });
    launcher.innerHTML = CHAT_ICON;  // our own static SVG
    var panel = el('div', 'bc-panel', null, { id: 'bc-panel', role: 'dialog', 'aria-label': title, hidden: '' });

    var header = el('div', 'bc-header');
    var heading = el('div', 'bc-heading');
    heading.append(el('h2', 'bc-title', title), el('p', 'bc-subtitle', t('Answers cite the book')));
    var newButton = button('bc-new', t('New conversation'));
    var closeButton = button('bc-close', '×', t('Close chat'));
    var modes = el('div', 'bc-modes', null, { role: 'group', 'aria-label': t('Mode') });
    var askMode = button('bc-mode bc-mode-ask', t('Ask'), null, { 'aria-pressed': 'true' });
    var searchMode = button('bc-mode bc-mode-search', t('Search'), null, { 'aria-pressed': 'false' });
    modes.append(askMode, searchMode);
    modes.hidden = options.search === 'off';
    header.append(heading, modes, newButton, closeButton);

    // The conversation is no live region: a screen reader would read every streamed token. The answer is announced
    // once, when it is final, by the status region below (which also says what a copy button did).
    var log = el('div', 'bc-log');
    var status = el('span', 'bc-sr', null, { role: 'status' });

    var form = el('form', 'bc-form', null, { novalidate: '' });
    var chip = el('div', 'bc-selection', null, { hidden: '' });
    var chipText = el('span', 'bc-selection-text');
    var chipRemove = button('bc-selection-remove', '×', t('Remove the selected text'));
    chip.append(chipText, chipRemove);
    var label = el('label', 'bc-sr', t('Your question'), { for: 'bc-input' });
    var input = el('textarea', 'bc-input', null,
      { id: 'bc-input', rows: '1', maxlength: String(MAX_QUESTION), placeholder: options.placeholder || t('Ask a question about this book') });
    var send = el('button', 'bc-send', t('Send'), { type: 'submit' });
    var row = el('div', 'bc-row');
    row.append(input, send);
    form.append(chip, label, row, el('p', 'bc-hint', t('Enter to send · Shift+Enter for a new line')));

    var searchPane = el('div', 'bc-search', null, { hidden: '' });
    var searchRow = el('div', 'bc-search-row');
    var searchInput = el('input', 'bc-search-input', null, {
      id: 'bc-search-input', type: 'search', role: 'combobox', 'aria-autocomplete': 'list', 'aria-expanded': 'false',
      'aria-controls': 'bc-results', autocomplete: 'off', spellcheck: 'false', maxlength: String(MAX_QUESTION),
      placeholder: t('Search the book'), 'aria-describedby': 'bc-search-status'
    });
    searchRow.append(el('label', 'bc-sr', t('Search the book'), { for: 'bc-search-input' }), searchInput);
    var searchStatus = el('p', 'bc-search-status', t(SEARCH_HINT), { id: 'bc-search-status', role: 'status' });
    var results = el('ul', 'bc-results', null, { id: 'bc-results', role: 'listbox', 'aria-label': t('Sections found') });
    var askQuery = button('bc-ask-query', t('Ask about this'), null, { disabled: '' });
    var searchActions = el('div', 'bc-search-actions');
    searchActions.append(askQuery, el('span', 'bc-hint', t('↑ ↓ to choose · Enter to open · Esc to clear')));
    searchPane.append(searchRow, searchStatus, results, searchActions);
    var footer = el('div', 'bc-footer');
    var footerRow = el('div', 'bc-footer-row');
    var about = makeLink(options.api + '/privacy/', t('About bookchat and your data'));
    about.className = 'bc-about';
    var myDataOpen = button('bc-my-data-open', t('My data'), null,
      { 'aria-expanded': 'false', 'aria-controls': 'bc-my-data' });
    footerRow.append(about, languageSwitch(), myDataOpen);
    var myDataBox = el('div', 'bc-my-data', null, { id: 'bc-my-data', hidden: '' });
    var myDataDownload = button('bc-my-data-download', t('Download'));
    var myDataErase = button('bc-my-data-erase', t('Delete'));
    var myDataStatus = el('span', 'bc-my-data-status', null, { role: 'status' });
    myDataBox.append(el('p', null, t('Your conversation and questions to the course staff from this browser:')),
      myDataDownload, myDataErase, myDataStatus);
    footer.append(footerRow, myDataBox);
    panel.append(header, log, form, searchPane, footer, status);

    var bubble = button('bc-ask-selection', t('Ask about this'), null, { hidden: '' });

    root.append(launcher, panel, bubble);
    shadow.append(style, root);
    document.body.appendChild(host);
    root.style.setProperty('--bc-on-accent', textColorOn(getComputedStyle(launcher).backgroundColor));
    showEmptyState();
    followPageTheme();

    // ---- opening and closing

    function isOpen() { return !panel.hidden; }

    function open() {
      panel.hidden = false;
      root.classList.add('bc-open');
      launcher.setAttribute('aria-expanded', 'true');
      input.focus();
      refreshHandoffs();
    }

    function close() {
      panel.hidden = true;
      root.classList.remove('bc-open');
      launcher.setAttribute('aria-expanded', 'false');
      hideBubble();
      launcher.focus();
    }

    function followPageTheme() {
      // Docusaurus-style sites switch themes with <html data-theme="dark">; follow that too.
      var html = document.documentElement;
      var sync = function () { root.classList.toggle('bc-dark', html.getAttribute('data-theme') === 'dark'); };
      sync();
      var observer = new MutationObserver(sync);
      observer.observe(html, { attributes: true, attributeFilter: ['data-theme'] });
      lifetime.signal.addEventListener('abort', function () { observer.disconnect(); });
    }

    // ---- the log

    function showEmptyState() {
      var empty = el('div', 'bc-empty');
      empty.append(el('strong', null, t('Ask anything about this book')),
        document.createTextNode(t('Answers are drawn only from the book, and each one lists its sources.')));
      log.replaceChildren(empty);
    }

    function addToLog(node) {
      var empty = log.querySelector('.bc-empty');
      if (empty) empty.remove();
      log.appendChild(node);
      scrollToEnd(true);
    }

    function scrollToEnd(force) {
      var nearEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
      if (force || nearEnd) log.scrollTop = log.scrollHeight;
    }

    function newConversation() {
      if (state.request) state.request.abort();
      state.sessionId = null;
      storage('remove', sessionKey);
      setSelection(null);
      showEmptyState();
      input.value = '';
      autoresize();
      input.focus();
      refreshHandoffs();  // the answers are gone from the panel: their hand-offs are listed instead
    }

    // ---- asking

    function submit() {
      var question = input.value.trim();
      if (!question || state.request) return;
      var selection = state.selection;
      input.value = '';
      autoresize();
      setSelection(null);
      addToLog(renderQuestion(question, selection));
      var view = renderPendingAnswer();
      addToLog(view.node);
      say(t('Looking in the book…'));
      var payload = { question: question, book: options.book };
      if (state.sessionId) payload.session_id = state.sessionId;
      if (selection) payload.selected_text = selection;
      var language = pageLanguage();
      if (language) payload.locale = language;
      versionToAsk().then(function (version) {
        if (version) payload.version = version;
        askAndRender(payload, view);
      });
    }

    async function askAndRender(payload, view) {
      var controller = new AbortController();
      state.request = controller;
      setBusy(true);
      try {
        var final = await askRetryingOnce(payload, view, controller.signal);
        if (final.session_id) {
          state.sessionId = String(final.session_id);
          storage('set', sessionKey, state.sessionId);
        }
        renderFinal(view, final);
      } catch (error) {
        if (isAbort(error)) return;
        if (error.field === 'session_id') {  // an expired or unknown session: start a fresh one next time
          state.sessionId = null;
          storage('remove', sessionKey);
        }
        renderError(view, error.userMessage || t(MESSAGES.unreachable));
      } finally {
        if (state.request === controller) {
          state.request = null;
          setBusy(false);
        }
      }
    }

    /** The answer; a 429 is waited out in the answer's place ("Many questions at once — trying again in N s",
     *  counting down Retry-After) and the question sent once more. A second 429, or a wait over RETRY_CAP seconds,
     *  is thrown: the student may ask again. */
    async function askRetryingOnce(payload, view, signal) {
      try {
        return await api.ask(payload, view.addToken, signal);
      } catch (error) {
        if (!error.retryAfter || error.retryAfter > RETRY_CAP) throw error;
        say(t('Many questions at once. Trying again in {n} seconds.', { n: error.retryAfter }));
        await countDown(error.retryAfter, signal, view.waiting);
        view.restart();
        return api.ask(payload, view.addToken, signal);
      }
    }

    function setBusy(busy) {
      send.disabled = busy;
      log.setAttribute('aria-busy', busy ? 'true' : 'false');
    }

    function renderQuestion(question, selection) {
      var node = el('div', 'bc-question', null, { dir: 'auto' });  // the student's words, in their direction
      if (selection) node.append(el('span', 'bc-question-quote', '“' + truncate(selection, 80) + '”'));
      node.append(document.createTextNode(question));
      return node;
    }

    function renderPendingAnswer() {
      var node = el('div', 'bc-answer', null, { 'data-state': 'streaming' });
      var text = el('div', 'bc-answer-text', null, { dir: 'auto' });  // a label in one script, a quote in another
      var typing = el('span', 'bc-typing');
      typing.append(el('i', 'bc-dot'), el('i', 'bc-dot'), el('i', 'bc-dot'), el('span', 'bc-sr', t('Looking in the book…')));
      text.append(typing);
      node.append(text);
      var streamed = '';
      var note = null;  // "Many questions at once — trying again in N s", while a 429 is waited out
      return {
        node: node,
        text: text,
        waiting: function (left) {
          if (!note) {
            note = el('p', 'bc-notice bc-wait');
            node.dataset.state = 'waiting';
            text.replaceChildren(note);
          }
          note.textContent = t('Many questions at once — trying again in {wait}', { wait: duration(left) });
        },
        restart: function () {
          note = null;
          node.dataset.state = 'streaming';
          text.replaceChildren(typing);
        },
        addToken: function (token) {
          streamed += token;
          text.textContent = streamed;
          scrollToEnd(false);
        }
      };
    }

    function renderFinal(view, final) {
      var node = view.node;
      node.dataset.state = 'done';
      if (final.answer_id) node.dataset.answerId = String(final.answer_id);
      if (final.refused) node.dataset.refused = 'true';
      // The language the answer is written in (the question's: the pipeline's `language`), for screen readers.
      if (typeof final.language === 'string' && /^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(final.language)) {
        view.text.setAttribute('lang', final.language);
      }
      if (typeof final.answer_html === 'string') {
        view.text.innerHTML = final.answer_html;  // sanitised by the server; the only HTML we insert
        fixLinks(view.text, final.sources);
      } else {
        view.text.textContent = final.answer || '';
        view.text.style.whiteSpace = 'pre-wrap';
      }
      var spoken = view.text.textContent.trim();  // as shown (no Markdown marks), before the Copy buttons
      addCopyButtons(view.text);
      var meta = el('div', 'bc-meta');
      var level = LEVELS[final.confidence_level] ? final.confidence_level : 'low';
      // An answer of the course staff, served again: labelled with its date, and no confidence to speak of.
      var staff = !final.refused && (final.confidence_level === 'staff' || Boolean(final.staff_answer));
      var answeredOn = staff && final.staff_answer ? formatDate(final.staff_answer.answered_at) : '';
      var badge = final.refused
        ? el('span', 'bc-badge', t(REFUSALS[final.refusal_reason] || REFUSALS.not_covered), { 'data-level': 'none' })
        : staff ? el('span', 'bc-badge', answeredOn ? t(HANDOFF_DATED.answered, { date: answeredOn }) : t(HANDOFF_TITLES.answered),
          { 'data-level': 'staff' })
        : el('span', 'bc-badge', t(LEVELS[level]), { 'data-level': level });
      if (typeof final.confidence === 'number' && !final.refused && !staff) {
        badge.title = t('Confidence {percent}%', { percent: Math.round(final.confidence * 100) });
      }
      meta.append(badge);
      if (final.confidence_note && !final.refused && !staff) meta.append(el('span', 'bc-level-note', final.confidence_note, { dir: 'auto' }));
      node.append(meta);
      if (final.disclaimer) node.append(el('p', 'bc-disclaimer', final.disclaimer, { dir: 'auto' }));
      if (final.notice) node.append(el('p', 'bc-notice', final.notice, { dir: 'auto' }));
      var suggestions = (final.suggestions || []).filter(function (s) { return s && safeUrl(s.url); });
      if (final.refused && suggestions.length) node.append(renderSuggestions(suggestions));
      if (final.sources && final.sources.length) node.append(renderSources(final.sources, final.book_language));
      if (final.answer_id) node.append(renderFeedback(String(final.answer_id), final.session_id));
      // "Ask the course staff" stands out where the book fell short: refused, withheld or unsure.
      var fellShort = final.refused || final.flagged_for_review || level === 'unsure' || level === 'low';
      if (final.answer_id) node.append(renderHandoff(String(final.answer_id), fellShort && !staff));
      scrollToAnswer(node);
      say(spoken);
    }

    function scrollToAnswer(node) {
      // Show the start of a long answer rather than the bottom of its source list.
      var top = node.offsetTop - log.offsetTop - 8;
      log.scrollTop = node.offsetHeight > log.clientHeight ? top : log.scrollHeight;
    }

    function addCopyButtons(container) {
      // A code block scrolls sideways when its lines are long: focusable, so the keyboard can scroll it too.
      container.querySelectorAll('pre').forEach(function (pre) { pre.tabIndex = 0; });
      container.querySelectorAll('.bookchat-code').forEach(function (block) {
        var code = block.querySelector('pre');
        if (!code) return;
        var title = block.querySelector('.bookchat-code-title');
        var copy = button('bc-copy', t('Copy'), title ? t('Copy code: {title}', { title: title.textContent }) : t('Copy code'));
        copy.addEventListener('click', function () {
          copyText(code.textContent).then(function () {
            copy.textContent = t('Copied');
            say(t('Code copied to the clipboard.'));
          }, function () {
            copy.textContent = t('Copy failed');
            say(t("Couldn't copy the code; select it and copy by hand."));
          }).then(function () {
            setTimeout(function () { copy.textContent = t('Copy'); }, 2000);
          });
        });
        block.append(copy);
      });
    }

    function say(text) {
      status.textContent = '';
      setTimeout(function () { status.textContent = text; }, 50);
    }

    function copyText(text) {
      if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
      var scratch = el('textarea', null, null, { readonly: '', style: 'position:fixed;opacity:0;' });
      scratch.value = text;
      shadow.append(scratch);
      scratch.select();
      var copied = document.execCommand('copy');
      scratch.remove();
      return copied ? Promise.resolve() : Promise.reject(new Error('copy refused'));
    }

    function fixLinks(container, sources) {
      var titles = {};
      (sources || []).forEach(function (s) { titles[s.n] = [s.chapter, s.section].filter(Boolean).join(' › '); });
      container.querySelectorAll('a').forEach(function (link) {
        var url = safeUrl(link.getAttribute('href'));
        if (!url) {
          link.removeAttribute('href');
          return;
        }
        applyLinkTarget(link, url);
        var n = link.classList.contains('bookchat-cite') && link.getAttribute('data-n');
        if (n && titles[n]) link.title = t('Source {n}: {title}', { n: n, title: titles[n] });
      });
    }

    /** The cited sections; their excerpts are the book's words, in the book's language (``bookLanguage``). */
    function renderSources(sources, bookLanguage) {
      var box = el('div', 'bc-sources');
      box.append(el('p', 'bc-section-title', t('Sources')));
      var list = el('ol');
      sources.forEach(function (source) {
        var item = el('li', 'bc-source');
        var place = [source.chapter, source.section].filter(Boolean)
          .filter(function (part, i, parts) { return i === 0 || part !== parts[0]; }).join(' › ');
        item.append(makeLink(source.url, '[' + source.n + '] ' + (place || source.heading_path || t('Source'))));
        var excerpt = el('p', 'bc-excerpt', source.excerpt, { dir: 'auto' });
        if (typeof bookLanguage === 'string' && /^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/.test(bookLanguage)) {
          excerpt.setAttribute('lang', bookLanguage);
        }
        if (source.excerpt) item.append(excerpt);
        list.append(item);
      });
      box.append(list);
      return box;
    }

    function renderSuggestions(suggestions) {
      var box = el('div', 'bc-suggestions');
      box.append(el('p', 'bc-section-title', t('Related sections:')));
      var list = el('ul');
      suggestions.forEach(function (s) {
        var item = el('li');
        item.append(makeLink(s.url, s.title || s.heading_path || s.url));
        list.append(item);
      });
      box.append(list);
      return box;
    }

    function renderError(view, message) {
      view.node.dataset.state = 'error';
      view.node.replaceChildren(el('p', 'bc-error', message, { role: 'alert' }));
      scrollToEnd(true);
    }

    // ---- feedback

    function renderFeedback(answerId, sessionId) {
      var box = el('div', 'bc-feedback');
      var up = button('bc-thumb-up', null, t('Helpful'), { 'aria-pressed': 'false' });
      var down = button('bc-thumb-down', null, t('Not helpful'), { 'aria-pressed': 'false' });
      up.innerHTML = down.innerHTML = THUMB_ICON;  // our own static SVG
      var status = el('span', 'bc-feedback-status', null, { role: 'status' });
      var comment = el('div', 'bc-comment', null, { hidden: '' });
      var commentInput = el('textarea', 'bc-comment-input', null, { rows: '2', maxlength: String(MAX_COMMENT),
        'aria-label': t('Comment on this answer (optional)'), placeholder: t('What was good or missing? (optional)') });
      var commentSend = button('bc-comment-send', t('Send comment'));
      comment.append(commentInput, commentSend);
      box.append(el('span', null, t('Was this helpful?')), up, down, status, comment);
      var rating = null;

      async function sendFeedback(body, controls, thanks) {
        controls.forEach(function (c) { c.disabled = true; });
        status.textContent = t('Sending…');
        if (sessionId) body.session_id = String(sessionId);
        try {
          await api.feedback(answerId, body);
          status.textContent = thanks;
          return true;
        } catch (error) {
          status.textContent = error.userMessage || t(MESSAGES.unreachable);
          return false;
        } finally {
          controls.forEach(function (c) { c.disabled = false; });
        }
      }

      async function vote(value) {
        if (!(await sendFeedback({ rating: value }, [up, down], t('Thanks for the feedback!')))) return;
        rating = value;
        up.setAttribute('aria-pressed', String(value === 'up'));
        down.setAttribute('aria-pressed', String(value === 'down'));
        var handoff = value === 'down' && box.parentNode && box.parentNode.querySelector('.bc-handoff');
        if (handoff) setProminent(handoff, true);  // voted down: "Ask the course staff" stands out
        if (comment.hidden) {
          comment.hidden = false;
          scrollToEnd(false);
        }
      }

      up.addEventListener('click', function () { vote('up'); });
      down.addEventListener('click', function () { vote('down'); });
      commentSend.addEventListener('click', async function () {
        var text = commentInput.value.trim().slice(0, MAX_COMMENT);
        if (!text || !rating) return commentInput.focus();
        if (await sendFeedback({ rating: rating, comment: text }, [up, down, commentSend, commentInput],
          t('Thanks, your comment was sent.'))) comment.hidden = true;
      });
      return box;
    }

    // ---- "Ask the course staff": hand-offs, and what the staff did with them

    function storedHandoffs() {
      try {
        var list = JSON.parse(lasting('get', handoffKey) || '[]');
        return Array.isArray(list) ? list.filter(function (entry) {
          return entry && TOKEN.test(entry.token) && typeof entry.answer_id === 'string';
        }) : [];
      } catch (e) {
        return [];
      }
    }

    function storeHandoffs(list) {
      lasting('set', handoffKey, JSON.stringify(list.slice(-HANDOFFS_KEPT)));
    }

    function keepHandoff(token, answerId) {
      var list = storedHandoffs().filter(function (entry) { return entry.token !== token; });
      list.push({ token: token, answer_id: answerId, at: new Date().toISOString() });
      storeHandoffs(list);
    }

    function forgetHandoff(token) {
      storeHandoffs(storedHandoffs().filter(function (entry) { return entry.token !== token; }));
    }

    function renderHandoff(answerId, prominent) {
      var box = el('div', 'bc-handoff');
      var ask = button('bc-handoff-open', null, null, { 'aria-expanded': 'false' });
      box.append(ask);
      setProminent(box, prominent);
      ask.addEventListener('click', function () { toggleHandoffForm(box, ask, answerId); });
      return box;
    }

    function setProminent(box, prominent) {
      box.classList.toggle('bc-handoff-prominent', Boolean(prominent));
      box.querySelector('.bc-handoff-open').textContent = prominent ? t('Not what you needed? Ask the course staff')
        : t('Ask the course staff');
    }

    async function toggleHandoffForm(box, ask, answerId) {
      var form = box.querySelector('.bc-handoff-form');
      if (form) {
        form.hidden = !form.hidden;
      } else {
        var facts = await api.handoffForm();
        form = box.querySelector('.bc-handoff-form');  // a second click while the facts came
        if (!form) {
          form = renderHandoffForm(answerId, facts);
          box.append(form);
          ask.setAttribute('aria-controls', form.id);
        }
      }
      ask.setAttribute('aria-expanded', String(!form.hidden));
      if (!form.hidden) {
        form.querySelector('textarea').focus();
        scrollToEnd(false);
      }
    }

    function renderHandoffForm(answerId, facts) {
      var id = 'bc-handoff-' + answerId;
      var max = Number(facts.note_max_chars) > 0 ? Number(facts.note_max_chars) : 0;
      var form = el('form', 'bc-handoff-form', null, { id: id, novalidate: '' });
      var note = el('textarea', 'bc-handoff-note', null,
        { id: id + '-note', rows: '3', 'aria-describedby': id + '-about ' + id + '-count' });
      if (max) note.maxLength = max;
      var count = el('p', 'bc-handoff-count', max ? t('Up to {max} characters.', { max: max }) : '', { id: id + '-count' });
      form.append(el('p', 'bc-handoff-about', t('The course staff get your question, this answer and the conversation before it, and reply here.'),
        { id: id + '-about' }),
        el('label', null, t('A note for the course staff (optional)'), { for: id + '-note' }), note, count);
      var email = null;
      if (facts.contact_email === true) {
        email = el('input', 'bc-handoff-email', null,
          { id: id + '-email', type: 'email', maxlength: '254', autocomplete: 'email' });
        form.append(el('label', null, t('Your e-mail address (optional, if the staff may write to you)'),
          { for: id + '-email' }), email);
      }
      var send = el('button', 'bc-handoff-send', t('Send to the course staff'), { type: 'submit' });
      var status = el('p', 'bc-handoff-form-status', null, { role: 'status' });
      form.append(send, status);
      note.addEventListener('input', function () {
        if (max) count.textContent = note.value.length + ' of ' + max + ' characters';
      });
      form.addEventListener('submit', function (event) {
        event.preventDefault();
        var body = { note: note.value.trim() };
        if (email && email.value.trim()) body.contact_email = email.value.trim();
        sendHandoff(answerId, body, send, status);
      });
      return form;
    }

    async function sendHandoff(answerId, body, send, status) {
      send.disabled = true;
      status.textContent = t('Sending…');
      try {
        var sent = await api.handoff(answerId, body);
        var token = String((sent && sent.status_url) || '').split('?')[0].split('/').pop();
        if (!TOKEN.test(token)) throw userError(t(MESSAGES.unreadable));
        keepHandoff(token, answerId);
        handoffs.last[token] = 'open';
        var entry = { token: token, answer_id: answerId };
        var data = await api.handoffStatus(token).catch(function () { return null; });
        var node = placeHandoffStatus(entry, renderHandoffStatus(entry, data || { status: 'open' }));
        var title = node.querySelector('.bc-handoff-title');
        title.tabIndex = -1;  // focus follows the form, which is gone
        title.focus();
        say(t('Sent to the course staff. Their reply will show under this answer.'));
        scheduleHandoffCheck(true);
      } catch (error) {
        status.textContent = error.userMessage || t(MESSAGES.unreachable);
      } finally {
        send.disabled = false;
      }
    }

    /** A hand-off's status as the reader sees it: the staff's reply (its HTML, sanitised by the server, and its
     *  citations), their reason for declining, or that it waits; the reader's own question and note as text. */
    function renderHandoffStatus(entry, data) {
      var status = HANDOFF_TITLES[data.status] ? data.status : 'open';
      var reply = status === 'answered' && data.reply && typeof data.reply === 'object' ? data.reply : null;
      var when = formatDate(reply ? reply.answered_at : status === 'open' ? data.asked_at : data.closed_at);
      var node = el('section', 'bc-handoff-status', null,
        { 'data-status': status, 'data-token': entry.token, 'aria-label': t('Your question to the course staff') });
      node.append(el('p', 'bc-handoff-title', when ? t(HANDOFF_DATED[status], { date: when }) : t(HANDOFF_TITLES[status])));
      if (data.question) node.append(labelled('bc-handoff-question', t('Your question'), data.question));
      if (data.note) node.append(labelled('bc-handoff-note-shown', t('Your note'), data.note));
      if (reply) {
        var text = el('div', 'bc-answer-text bc-staff-reply');
        if (typeof reply.answer_html === 'string') {
          text.innerHTML = reply.answer_html;  // sanitised by the server, as an answer's
          fixLinks(text, reply.citations);
        } else {
          text.textContent = String(reply.answer || '');
        }
        node.append(text);
        var citations = (Array.isArray(reply.citations) ? reply.citations : []).filter(function (c) { return c; });
        if (citations.length) node.append(renderSources(citations));
      } else if (status === 'declined') {
        node.append(labelled('bc-handoff-reason', t('Their reason'), data.declined_reason || ''));
      } else if (status === 'coverage') {
        node.append(el('p', null, t('The course staff think the book should cover this, and its authors were told.')));
      } else {
        node.append(el('p', null, t('Their reply will show here when it comes.')));
      }
      var link = makeLink(options.api + '/api/v1/handoffs/' + encodeURIComponent(entry.token), t('Link to this question'));
      var more = el('p', 'bc-handoff-link');
      more.append(link, document.createTextNode(' (keep it to come back to the reply from any browser)'));
      node.append(more);
      return node;
    }

    function labelled(className, label, text) {
      var node = el('p', className);
      node.append(el('span', 'bc-handoff-label', label), el('span', 'bc-handoff-text', String(text)));
      return node;
    }

    /** In place of the hand-off's earlier status, else under its answer (in place of the button), else in "Your
     *  questions to the course staff" at the top of the panel. */
    function placeHandoffStatus(entry, node) {
      var find = function (selector, test) {
        return Array.prototype.filter.call(log.querySelectorAll(selector), test)[0];
      };
      var earlier = find('.bc-handoff-status', function (n) { return n.dataset.token === entry.token; });
      var answer = find('.bc-answer[data-answer-id]', function (n) { return n.dataset.answerId === entry.answer_id; });
      if (earlier) {
        earlier.replaceWith(node);
      } else if (answer) {
        var box = answer.querySelector('.bc-handoff');
        if (box) box.replaceWith(node);
        else answer.append(node);
      } else {
        var item = el('li');
        item.append(node);
        staffList().append(item);
      }
      return node;
    }

    function staffList() {
      var box = log.querySelector('.bc-staff');
      if (!box) {
        box = el('section', 'bc-staff', null, { 'aria-labelledby': 'bc-staff-title' });
        box.append(el('h3', 'bc-staff-title', t('Your questions to the course staff'), { id: 'bc-staff-title' }),
          el('ol', 'bc-staff-list'));
        log.prepend(box);
      }
      return box.querySelector('ol');
    }

    /** Each kept hand-off's status, shown where it belongs; the reader is told when one waiting has its reply. */
    async function refreshHandoffs() {
      var entries = storedHandoffs();
      if (!entries.length || handoffs.busy) return;
      handoffs.busy = true;
      try {
        var found = await Promise.all(entries.map(function (entry) {
          return api.handoffStatus(entry.token).then(function (data) { return { data: data }; },
            function () { return null; });
        }));
        var waiting = false;
        entries.forEach(function (entry, i) {
          if (!found[i]) return;  // unreachable for now: shown next time
          if (found[i].data === null) return forgetHandoff(entry.token);  // gone with the records kept that long
          var data = found[i].data;
          placeHandoffStatus(entry, renderHandoffStatus(entry, data));
          if (handoffs.last[entry.token] === 'open' && data.status !== 'open') {
            say(t('The course staff replied to your question: {question}', { question: truncate(String(data.question || ''), 80) }));
          }
          handoffs.last[entry.token] = data.status;
          if (data.status === 'open') waiting = true;
        });
        scheduleHandoffCheck(waiting);
      } finally {
        handoffs.busy = false;
      }
    }

    function scheduleHandoffCheck(waiting) {
      clearTimeout(handoffs.timer);
      // A closed panel or a hidden tab looks again when it opens or comes back (open, visibilitychange).
      handoffs.timer = waiting ? setTimeout(function () {
        if (isOpen() && document.visibilityState !== 'hidden') refreshHandoffs();
      }, HANDOFF_RECHECK) : null;
    }

    // ---- "My data": what bookchat holds of this browser's conversation and hand-offs, downloaded or deleted

    function toggleMyData() {
      var opening = myDataBox.hidden;
      myDataBox.hidden = !opening;
      myDataOpen.setAttribute('aria-expanded', String(opening));
      myDataStatus.textContent = '';
      if (opening) myDataDownload.focus();
    }

    /** The ids this browser holds: the conversation (sessionStorage) and the hand-offs' tokens (localStorage). */
    function myDataIds() {
      return { session_ids: state.sessionId ? [state.sessionId] : [],
        handoff_tokens: storedHandoffs().map(function (entry) { return entry.token; }) };
    }

    async function myData(erase) {
      var ids = myDataIds();
      if (!ids.session_ids.length && !ids.handoff_tokens.length) {
        myDataStatus.textContent = t('Nothing: this browser holds no conversation or question to the course staff.');
        return;
      }
      if (erase && !window.confirm(t("Delete your conversation and questions to the course staff from bookchat? This can't be undone."))) return;
      myDataDownload.disabled = myDataErase.disabled = true;
      myDataStatus.textContent = erase ? t('Deleting…') : t('Preparing the file…');
      try {
        var body = await api.myData(ids, erase);
        if (erase) forgetMyData(body);
        else saveJson(body, 'bookchat-my-data.json');
        if (!erase) myDataStatus.textContent = t('Downloaded: {file}.', { file: 'bookchat-my-data.json' });
      } catch (error) {
        myDataStatus.textContent = error.userMessage ? error.message : t(MESSAGES.unreachable);
      } finally {
        myDataDownload.disabled = myDataErase.disabled = false;
      }
    }

    /** After a deletion: the conversation and the hand-offs' tokens are forgotten here too, and gone from the panel. */
    function forgetMyData(erased) {
      if (state.request) state.request.abort();
      state.sessionId = null;
      storage('remove', sessionKey);
      lasting('remove', handoffKey);
      clearTimeout(handoffs.timer);
      handoffs.last = {};
      showEmptyState();
      myDataStatus.textContent = t('Deleted: {conversations} conversation(s), {handoffs} question(s) to the course staff.',
        { conversations: erased.conversations || 0, handoffs: erased.handoffs || 0 });
    }

    function saveJson(data, name) {
      var link = el('a', null, null, { download: name });
      link.href = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
      link.click();
      setTimeout(function () { URL.revokeObjectURL(link.href); }, 10000);
    }

    // ---- searching: the mode, the combobox, the results

    // pausedUntil: after a 429, no search is sent before this time (ms); the box's text is searched then, once.
    var searchState = { seq: 0, controller: null, items: [], active: -1, searchId: '', pausedUntil: 0, resume: null };

    function setMode(mode) {
      var searching = mode === 'search';
      searchPane.hidden = !searching;
      log.hidden = searching;
      form.hidden = searching;
      newButton.hidden = searching;
      askMode.setAttribute('aria-pressed', String(!searching));
      searchMode.setAttribute('aria-pressed', String(searching));
      (searching ? searchInput : input).focus();
    }

    function openSearch(query) {
      if (options.search === 'off') return;
      open();
      setMode('search');
      if (typeof query === 'string') {
        searchInput.value = query;
        search(query);
      }
    }

    /** One search per pause in typing; a newer keystroke aborts the older request, and a response that still
     *  arrives after a newer search began is dropped, so the list always shows the last query typed. */
    function search(text, resumed) {
      var query = text.trim();
      if (searchState.controller) searchState.controller.abort();
      var seq = ++searchState.seq;
      askQuery.disabled = !query;
      if (!query) return renderResults(null);
      if (Date.now() < searchState.pausedUntil) return;  // searched when the pause ends
      var controller = new AbortController();
      searchState.controller = controller;
      // The conversation's id lets the server count the searches of this reader apart from the rest of the class.
      var params = { q: query, book: options.book, locale: pageLanguage(), report_opens: 'true',
        session_id: state.sessionId };
      versionToAsk().then(function (version) {
        if (seq !== searchState.seq) return null;
        params.version = version;
        return api.search(params, controller.signal).then(function (result) {
          if (seq === searchState.seq) renderResults(result);
        }, function (error) {
          if (isAbort(error) || seq !== searchState.seq) return;
          if (error.retryAfter) return pauseSearches(error.retryAfter, !resumed);
          renderResults(null, error.userMessage || t(MESSAGES.unreadable));
        });
      });
    }

    /** A search refused with 429: the results shown stay, and no search is sent for the seconds the server asked;
     *  then what the box holds is searched, once by itself (after a resumed search's 429, at the next keystroke). */
    function pauseSearches(seconds, resume) {
      var wait = Math.min(seconds, RETRY_CAP);
      searchState.pausedUntil = Date.now() + wait * 1000;
      searchStatus.textContent = t('Many searches at once; the results follow your typing again in {wait}.',
        { wait: duration(wait) });
      clearTimeout(searchState.resume);
      searchState.resume = setTimeout(function () {
        searchState.pausedUntil = 0;
        if (resume) search(searchInput.value, true);
      }, wait * 1000);
    }

    function renderResults(result, error) {
      searchState.items = [];
      searchState.active = -1;
      results.replaceChildren();
      searchInput.removeAttribute('aria-activedescendant');
      results.dataset.query = result ? String(result.query || '') : '';
      searchState.searchId = result && typeof result.search_id === 'string' ? result.search_id : '';
      (result && Array.isArray(result.pages) ? result.pages : []).forEach(function (page) {
        (Array.isArray(page.sections) ? page.sections : []).forEach(function (section) {
          var n = Number(section.n);  // its place in the result, which a report of it opened names
          var url = safeUrl(section.url);
          if (!url) return;
          var index = searchState.items.length;
          var option = el('li', 'bc-result', null,
            { role: 'option', id: 'bc-result-' + index, 'aria-selected': 'false', 'data-url': url.href });
          var where = [page.chapter, page.title].filter(function (part, i, parts) {
            return part && (i === 0 || part !== parts[0]);
          }).join(' › ');
          option.append(el('span', 'bc-result-page', where), el('span', 'bc-result-title', section.title),
            snippetNode(section));
          option.addEventListener('mousedown', function (event) { event.preventDefault(); });  // focus stays in the box
          option.addEventListener('click', function () { openResult(index); });
          results.appendChild(option);
          searchState.items.push({ node: option, url: url, n: n });
        });
      });
      var count = searchState.items.length;
      searchInput.setAttribute('aria-expanded', String(count > 0));
      if (error) searchStatus.textContent = error;
      else if (!result) searchStatus.textContent = t(SEARCH_HINT);
      else if (!count) searchStatus.textContent = t('Nothing found. Try other words, or ask.');
      else if (result.matched === 'meaning') {
        searchStatus.textContent = count === 1 ? t('No section uses these words; the nearest in meaning: 1 section.')
          : t('No section uses these words; the nearest in meaning: {n} sections.', { n: count });
      } else searchStatus.textContent = count === 1 ? t('1 section.') : t('{n} sections.', { n: count });
    }

    /** The snippet as text, its matched words in <mark>, from the offsets the server gives (never as HTML). */
    function snippetNode(section) {
      var node = el('span', 'bc-result-snippet');
      var text = String(section.snippet || '');
      var last = 0;
      (Array.isArray(section.marks) ? section.marks : []).forEach(function (mark) {
        var start = Number(mark && mark[0]);
        var end = Number(mark && mark[1]);
        if (!(start >= last && end > start && end <= text.length)) return;
        node.append(document.createTextNode(text.slice(last, start)), el('mark', null, text.slice(start, end)));
        last = end;
      });
      node.append(document.createTextNode(text.slice(last)));
      return node;
    }

    function setActive(index) {
      var items = searchState.items;
      if (!items.length) return;
      searchState.active = (index + items.length) % items.length;
      items.forEach(function (item, i) { item.node.setAttribute('aria-selected', String(i === searchState.active)); });
      var node = items[searchState.active].node;
      searchInput.setAttribute('aria-activedescendant', node.id);
      // Scroll the list only (scrollIntoView would scroll the host page too).
      if (node.offsetTop < results.scrollTop) results.scrollTop = node.offsetTop;
      else if (node.offsetTop + node.offsetHeight > results.scrollTop + results.clientHeight) {
        results.scrollTop = node.offsetTop + node.offsetHeight - results.clientHeight;
      }
    }

    function openResult(index) {
      var item = searchState.items[index];
      if (!item) return;
      if (searchState.searchId && item.n > 0) api.opened(searchState.searchId, item.n);
      if (item.url.origin === location.origin) location.assign(item.url.href);
      else window.open(item.url.href, '_blank', 'noopener');
    }

    function askAboutQuery() {
      var query = searchInput.value.trim();
      if (!query) return;
      setMode('ask');
      input.value = query;
      autoresize();
      submit();
    }

    function isSearchKey(event) {
      if ((event.key === 'k' || event.key === 'K') && (event.metaKey || event.ctrlKey) && !event.altKey) return true;
      if (event.key !== '/' || event.metaKey || event.ctrlKey || event.altKey) return false;
      var target = event.composedPath()[0];
      return !(target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)));
    }

    function isSearchButton(target) {
      try {
        return Boolean(target && target.closest && target.closest(options.searchButton));
      } catch (e) {
        return false;  // a selector the browser can't read: nothing is taken over
      }
    }

    // ---- the selected text: bubble and chip

    function setSelection(text) {
      state.selection = text || null;
      chip.hidden = !text;
      chipText.textContent = text ? t('About: “{text}”', { text: truncate(text, 80) }) : '';
    }

    function pageSelection() {
      var selection = window.getSelection && window.getSelection();
      if (!selection || selection.isCollapsed || !selection.rangeCount) return null;
      var range = selection.getRangeAt(0);
      if (host.contains(range.commonAncestorContainer) || host.contains(selection.anchorNode)) return null;
      var text = selection.toString().trim();
      if (text.length < 3) return null;
      var rect = range.getBoundingClientRect();
      if (!rect.width && !rect.height) return null;
      return { text: text.slice(0, MAX_SELECTION).trim(), rect: rect };
    }

    function updateBubble() {
      var found = pageSelection();
      if (!found) state.accepted = null;
      if (!found || found.text === state.accepted) return hideBubble();
      bubble.hidden = false;
      state.offered = found.text;
      var width = bubble.offsetWidth;
      var height = bubble.offsetHeight;
      var left = Math.min(Math.max(8, found.rect.left + found.rect.width / 2 - width / 2), window.innerWidth - width - 8);
      var top = found.rect.top - height - 8;
      if (top < 8) top = Math.min(found.rect.bottom + 8, window.innerHeight - height - 8);
      bubble.style.left = Math.round(left) + 'px';
      bubble.style.top = Math.round(top) + 'px';
    }

    function hideBubble() {
      bubble.hidden = true;
      state.offered = null;
    }

    function askAboutSelection() {
      var text = state.offered;
      hideBubble();
      if (!text) return;
      state.accepted = text;
      setSelection(text);
      open();
    }

    // ---- events

    function autoresize() {
      input.style.height = 'auto';
      input.style.height = Math.min(input.scrollHeight + 2, 140) + 'px';
    }

    launcher.addEventListener('click', function () { if (isOpen()) close(); else open(); });
    closeButton.addEventListener('click', close);
    newButton.addEventListener('click', newConversation);
    chipRemove.addEventListener('click', function () { setSelection(null); input.focus(); });
    form.addEventListener('submit', function (event) { event.preventDefault(); submit(); });
    input.addEventListener('input', autoresize);
    input.addEventListener('keydown', function (event) {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        submit();
      }
    });
    askMode.addEventListener('click', function () { setMode('ask'); });
    searchMode.addEventListener('click', function () { setMode('search'); });
    searchInput.addEventListener('input', debounce(function () { search(searchInput.value); }, SEARCH_DELAY));
    searchInput.addEventListener('keydown', function (event) {
      if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
        event.preventDefault();
        var down = event.key === 'ArrowDown';
        setActive(searchState.active < 0 ? (down ? 0 : -1) : searchState.active + (down ? 1 : -1));
      } else if (event.key === 'Enter' && !event.isComposing) {
        event.preventDefault();
        openResult(searchState.active >= 0 ? searchState.active : 0);
      } else if (event.key === 'Escape' && searchInput.value) {
        event.preventDefault();
        event.stopPropagation();  // Esc clears the box first; the next one closes the panel
        searchInput.value = '';
        search('');
      }
    });
    askQuery.addEventListener('click', askAboutQuery);
    myDataOpen.addEventListener('click', toggleMyData);
    myDataDownload.addEventListener('click', function () { myData(false); });
    myDataErase.addEventListener('click', function () { myData(true); });
    if (options.search === 'replace') {
      // Before the site's own handlers (capture phase), which then never see the key or the click.
      window.addEventListener('keydown', function (event) {
        if (!isSearchKey(event)) return;
        event.preventDefault();
        event.stopImmediatePropagation();
        openSearch();
      }, { capture: true, signal: lifetime.signal });
      document.addEventListener('click', function (event) {
        if (!isSearchButton(event.target)) return;
        event.preventDefault();
        event.stopImmediatePropagation();
        openSearch();
      }, { capture: true, signal: lifetime.signal });
    } else if (options.search === 'on') {
      window.addEventListener('keydown', function (event) {
        if (event.defaultPrevented || !isSearchKey(event)) return;  // the site's own search came first
        event.preventDefault();
        openSearch();
      }, listening);
    }
    document.addEventListener('visibilitychange', function () {
      if (document.visibilityState === 'visible' && isOpen()) refreshHandoffs();  // back to the tab: any reply?
    }, listening);
    bubble.addEventListener('mousedown', function (event) { event.preventDefault(); });  // keep the selection
    bubble.addEventListener('click', askAboutSelection);

    var laterUpdateBubble = debounce(updateBubble, 180);
    document.addEventListener('selectionchange', laterUpdateBubble, listening);
    document.addEventListener('mouseup', laterUpdateBubble, listening);
    document.addEventListener('keyup', function (event) { if (event.key !== 'Escape') laterUpdateBubble(); }, listening);
    window.addEventListener('scroll', function () { if (!bubble.hidden) laterUpdateBubble(); },
      { passive: true, signal: lifetime.signal });
    document.addEventListener('keydown', function (event) {
      if (event.key !== 'Escape') return;
      hideBubble();
      var fromWidget = event.composedPath().indexOf(host) >= 0 || document.activeElement === document.body;
      if (isOpen() && fromWidget) close();
    }, listening);

    function destroy() {
      if (state.request) state.request.abort();
      clearTimeout(handoffs.timer);
      lifetime.abort();
      host.remove();
    }

    /** The interface's languages, each named in itself; the reader's choice is kept (by ``onLanguage``). */
    function languageSwitch() {
      var box = el('span', 'bc-language');
      var select = el('select', 'bc-language-select', null, { id: 'bc-language' });
      (ui.languages || []).forEach(function (language) {
        var option = el('option', null, String(language.name), { value: String(language.code), lang: String(language.code) });
        option.selected = language.code === ui.language;
        select.append(option);
      });
      select.addEventListener('change', function () { onLanguage(select.value); });
      box.append(el('label', 'bc-sr', t('Language'), { for: 'bc-language' }), select);
      box.hidden = !(ui.languages || []).length;
      return box;
    }

    return { open: open, close: close, search: openSearch, destroy: destroy, isOpen: isOpen };
  }

  // ---------------------------------------------------------------- start

  var options = readOptions(script);
  if (!options) return;

  var ENGLISH = { language: 'en', dir: 'ltr', messages: {}, languages: [] };

  /** The reader's languages, best first: the one chosen with the switch, else the browser's. */
  function readerLanguages() {
    var chosen = lasting('get', LANGUAGE_KEY);
    var wanted = chosen ? [chosen] : (navigator.languages && navigator.languages.length ? navigator.languages
      : [navigator.language || '']);
    return Array.prototype.filter.call(wanted, function (tag) {
      return /^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$/.test(tag);
    }).slice(0, 8).join(',');
  }

  /** The interface in the first of ``languages`` bookchat speaks; English when it speaks none or can't be reached. */
  async function loadInterface(languages) {
    try {
      var response = await fetch(options.api + '/api/v1/interface?lang=' + encodeURIComponent(languages),
        { mode: 'cors', credentials: 'omit' });
      var body = response.ok ? await response.json() : null;
      if (body && body.messages && typeof body.messages === 'object' && /^(ltr|rtl)$/.test(body.dir)) return body;
    } catch (e) { /* unreachable: the interface in English, and asking says why */ }
    return ENGLISH;
  }

  var current = null;

  async function mount(languages, reopen) {
    var ui = await loadInterface(languages);
    var wasOpen = reopen && current && current.isOpen();
    if (current) current.destroy();
    CATALOGUE = ui.messages;
    current = createWidget(options, ui, function (code) {
      lasting('set', LANGUAGE_KEY, code);
      mount(code, true);
    });
    if (wasOpen) {
      current.open();
      var select = document.getElementById('bookchat-widget').shadowRoot.getElementById('bc-language');
      if (select) select.focus();  // where the reader was
    }
  }

  function start() {
    if (window.BookchatWidget) return;
    // The widget of the language in force (a switch builds another): each call goes to it, with its arguments.
    var call = function (name) {
      return function () { if (current) return current[name].apply(null, arguments); };
    };
    window.BookchatWidget = Object.freeze({ version: '1', open: call('open'), close: call('close'),
      search: call('search') });
    mount(readerLanguages(), false);
  }

  if (document.body) start();
  else document.addEventListener('DOMContentLoaded', start);
})();

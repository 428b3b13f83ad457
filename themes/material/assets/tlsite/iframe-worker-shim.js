/*
 * tlsite file:// Worker shim (written for tlsite; loaded through `extra.polyfills`).
 *
 * Why: Material's search runs its lunr index in a Web Worker, but Chromium refuses
 * `new Worker("file:///...")`, so a report opened straight from disk would sit at
 * "Initializing search". This file replaces `window.Worker` -- only on file:// pages --
 * with a class that runs the worker script inside a hidden iframe instead.
 *
 * How: an iframe without `src` keeps its initial about:blank document, which inherits the
 * page's origin, so the page may script it. Before the worker script is injected as a
 * <script src> into that document, the iframe's globals are adjusted to look like a
 * worker scope:
 *   - `postMessage(data)` delivers `data` to the page-side Worker object;
 *   - page -> worker messages are dispatched as "message" events on the iframe window, so
 *     `self.onmessage` and `self.addEventListener("message", ...)` both see them;
 *   - `importScripts(...urls)` injects the scripts in order (URLs resolve against the worker
 *     script, as in a real worker). It cannot block, so it returns a Promise; Material's
 *     worker `await`s it (only for non-English search languages);
 *   - `close()` terminates.
 * Messages are structured-cloned by the receiving window at post time (so each side gets
 * objects of its own realm and later mutations do not leak) and delivered asynchronously,
 * like a real worker. Not emulated: transfer lists (data is copied), module workers,
 * `self.location` (it is the iframe's about:blank), true parallelism (the "worker" shares
 * the page's thread).
 */
(function () {
  "use strict";

  if (location.protocol !== "file:" || typeof window.Worker === "undefined") {
    return; // over http(s) the browser's own Worker works; leave it alone
  }
  var NativeWorker = window.Worker;

  /* Structured-clone `data` into the realm of window `win` (what postMessage does). */
  function cloneInto(win, data) {
    return typeof win.structuredClone === "function" ? win.structuredClone(data) : data;
  }

  /* On a later task of `win`, pass a MessageEvent carrying `copy` to `emit` (async). */
  function dispatchLater(win, copy, emit) {
    win.setTimeout(function () {
      emit(new win.MessageEvent("message", { data: copy }));
    }, 0);
  }

  class FrameWorker extends EventTarget {
    constructor(url, options) {
      var href = new URL(String(url), document.baseURI).href;
      if (!href.startsWith("file:")) {
        // blob:/data: workers are not affected by the file:// restriction
        return new NativeWorker(url, options);
      }
      if (options && options.type === "module") {
        throw new TypeError("tlsite worker shim: module workers are not supported on file://");
      }
      super();
      this.onmessage = null;
      this.onerror = null;
      this.onmessageerror = null;
      this._href = href;
      this._pending = []; // page -> worker messages posted before the script has run
      this._running = false;
      this._closed = false;

      var frame = document.createElement("iframe");
      frame.hidden = true;
      frame.style.display = "none"; // themes may style iframes as blocks; keep it invisible
      frame.setAttribute("aria-hidden", "true");
      frame.tabIndex = -1;
      (document.body || document.documentElement).appendChild(frame);
      this._frame = frame;
      this._scope = frame.contentWindow;
      this._prepareScope(this._scope);

      var worker = this;
      var script = this._scope.document.createElement("script");
      script.src = href;
      script.addEventListener("load", function () {
        // the script has run and registered its listeners: release what was posted meanwhile
        worker._running = true;
        worker._pending.splice(0).forEach(function (copy) { worker._toWorker(copy); });
      });
      script.addEventListener("error", function () {
        worker._emit(new ErrorEvent("error", { message: "could not load worker script " + href }));
      });
      this._scope.document.head.appendChild(script);
    }

    /* Make the iframe's window behave like a dedicated worker's global scope. */
    _prepareScope(scope) {
      var worker = this;
      var base = this._href;
      scope.postMessage = function (data) {
        if (!worker._closed) {
          dispatchLater(window, cloneInto(window, data), function (event) { worker._emit(event); });
        }
      };
      scope.close = function () { worker.terminate(); };
      scope.importScripts = function () {
        var doc = scope.document;
        var loads = Array.prototype.map.call(arguments, function (url) {
          return new Promise(function (resolve, reject) {
            var s = doc.createElement("script");
            s.async = false; // injected scripts with async=false execute in insertion order
            s.src = new URL(String(url), base).href;
            s.addEventListener("load", function () { resolve(); });
            s.addEventListener("error", function () {
              reject(new Error("importScripts failed to load " + s.src));
            });
            doc.head.appendChild(s);
          });
        });
        return Promise.all(loads).then(function () { return undefined; });
      };
      // An uncaught exception in the worker surfaces as an "error" event on the Worker object.
      scope.addEventListener("error", function (e) {
        worker._emit(new ErrorEvent("error", {
          message: e.message, filename: e.filename, lineno: e.lineno, colno: e.colno,
        }));
      });
    }

    /* Fire an already-cloned message at the iframe window: reaches onmessage and listeners. */
    _toWorker(copy) {
      var scope = this._scope;
      dispatchLater(scope, copy, function (event) { scope.dispatchEvent(event); });
    }

    /* Dispatch to addEventListener listeners and to the matching `on<type>` property. */
    _emit(event) {
      if (this._closed) return;
      this.dispatchEvent(event);
      var handler = this["on" + event.type];
      if (typeof handler === "function") handler.call(this, event);
    }

    postMessage(data) {
      if (this._closed) return;
      var copy = cloneInto(this._scope, data); // clone now, as a real postMessage would
      if (this._running) {
        this._toWorker(copy);
      } else {
        this._pending.push(copy);
      }
    }

    terminate() {
      if (this._closed) return;
      this._closed = true;
      this._pending = [];
      this._frame.remove(); // drops the iframe's timers, so queued deliveries never run
    }
  }

  window.Worker = FrameWorker;
})();

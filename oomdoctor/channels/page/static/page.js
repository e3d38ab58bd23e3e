// OOM Doctor: the page works without this file. With it, forms are sent with fetch
// and the answer is swapped in place, code blocks get copy buttons, and a file can be
// dropped onto the text box. Strings come from data-* attributes (knowledge/texts.yaml).
(function () {
  "use strict";
  var main = document.getElementById("main");
  var status = document.getElementById("status");
  if (!main || !window.fetch || !window.FormData) { return; }
  var text = function (name) { return main.getAttribute("data-" + name) || ""; };

  function say(message) {
    status.textContent = message;
    if (message) { window.setTimeout(function () { if (status.textContent === message) { status.textContent = ""; } }, 4000); }
  }

  function showError(message) {
    var box = document.getElementById("error");
    if (!box) { return; }
    box.hidden = false;
    box.textContent = "";
    var p = document.createElement("p");
    var title = document.createElement("strong");
    title.textContent = box.getAttribute("data-title") || "";
    p.appendChild(title);
    p.appendChild(document.createTextNode(" " + message));
    box.appendChild(p);
    var field = document.getElementById("message");
    if (field) {
      field.setAttribute("aria-invalid", "true");
      var described = (field.getAttribute("aria-describedby") || "").split(" ");
      if (described.indexOf("error") < 0) { field.setAttribute("aria-describedby", described.concat("error").join(" ").trim()); }
    }
  }

  function addCopyButtons(root) {
    root.querySelectorAll(".code pre").forEach(function (pre) {
      if (pre.parentNode.querySelector("button.copy")) { return; }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = text("copy");
      button.setAttribute("aria-label", text("copy") + ": " + (pre.textContent.split("\n")[0] || ""));
      button.addEventListener("click", function () {
        var done = function () { button.textContent = text("copied"); say(text("copied"));
          window.setTimeout(function () { button.textContent = text("copy"); }, 2000); };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(pre.textContent).then(done, function () { selectText(pre); });
        } else { selectText(pre); }
      });
      pre.parentNode.insertBefore(button, pre);
    });
  }

  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  function readInto(file, field) {
    var reader = new FileReader();
    reader.onload = function () {
      var current = field.value.replace(/\s+$/, "");
      field.value = current ? current + "\n\n" + reader.result : reader.result;
      say(text("file-loaded").replace("{name}", file.name));
    };
    reader.readAsText(file);
  }

  function enhanceFiles(root) {
    root.querySelectorAll("input[type=file][data-file-into]").forEach(function (input) {
      input.addEventListener("change", function () {
        var field = document.getElementById(input.getAttribute("data-file-into"));
        if (field && input.files.length) { readInto(input.files[0], field); input.value = ""; }
      });
    });
    root.querySelectorAll("textarea[data-drop]").forEach(function (field) {
      field.addEventListener("dragover", function (e) { e.preventDefault(); field.classList.add("dragging"); });
      field.addEventListener("dragleave", function () { field.classList.remove("dragging"); });
      field.addEventListener("drop", function (e) {
        field.classList.remove("dragging");
        if (e.dataTransfer && e.dataTransfer.files.length) { e.preventDefault(); readInto(e.dataTransfer.files[0], field); }
      });
    });
  }

  function enhance(root) { addCopyButtons(root); enhanceFiles(root); }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.hasAttribute || !form.hasAttribute("data-enhance")) { return; }
    var data;
    try { data = new FormData(form, e.submitter); } catch (err) { return; }  // old browsers: plain post
    var field = form.querySelector("textarea[name=message]");
    var limit = parseInt(text("max-bytes"), 10);
    if (field && limit && new Blob([field.value]).size > limit) {
      e.preventDefault();
      showError(text("too-large").replace("{size}", String(new Blob([field.value]).size)));
      return;
    }
    e.preventDefault();
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    form.setAttribute("aria-busy", "true");
    say(text("working"));
    fetch(form.getAttribute("action"), { method: "POST", body: data, headers: { "Accept": "application/json" }, credentials: "same-origin" })
      .then(function (response) {
        return response.json().then(function (body) { return { ok: response.ok, body: body }; });
      })
      .then(function (result) {
        if (!result.ok) { showError(result.body.error || text("network-error")); say(""); return; }
        main.innerHTML = result.body.html;
        if (window.history && window.history.pushState) { window.history.pushState({}, "", result.body.url); }
        shown = window.location.pathname + window.location.search;
        if (result.body.title) { document.title = result.body.title; }
        document.querySelectorAll(".langs a[hreflang]").forEach(function (a) {
          a.setAttribute("href", window.location.pathname + "?lang=" + a.getAttribute("hreflang"));
        });
        enhance(main);
        say("");
        var heading = document.getElementById("reply-heading");
        if (heading) { heading.focus(); }
      })
      .catch(function () { showError(text("network-error")); say(""); })
      .then(function () {
        buttons.forEach(function (b) { b.disabled = false; });
        form.removeAttribute("aria-busy");
      });
  });

  // Back/forward between consultation states: load that address (a #fragment, like the skip link, is not one).
  var shown = window.location.pathname + window.location.search;
  window.addEventListener("popstate", function () {
    if (window.location.pathname + window.location.search !== shown) { window.location.reload(); }
  });
  enhance(document);
}());

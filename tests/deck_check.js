// Injected into a copy of a deck by tests/test_slides.py. It visits every slide and reports, as JSON
// in the element with the id "deck-report": whether reveal.js initialised, how many slides there are,
// and for each slide the scale the deck gave it and every piece of text or picture that falls off the
// 1280 x 720 screen or is cut by a box around it. It also counts the bertviz views that drew.
(function () {
  var TOL = 2;
  function report(obj) {
    var pre = document.createElement("pre");
    pre.id = "deck-report";
    pre.textContent = JSON.stringify(obj);
    document.body.appendChild(pre);
  }
  function inside(r, box) {
    return r.left >= box.left - TOL && r.right <= box.right + TOL && r.top >= box.top - TOL && r.bottom <= box.bottom + TOL;
  }
  function problems(slide, screen) {
    var found = [];
    // Nothing moves while a slide is checked: each element's clipping ancestors and each box are looked up once
    // (a code cell has thousands of text nodes under the same few boxes).
    var clipsOf = new Map(), rectOf = new Map();
    function clips(el) {  // the boxes that cut what is inside el: its ancestors up to the slide that clip
      var a = el.parentElement;
      if (!a || a === slide) { return []; }
      if (!clipsOf.has(el)) {
        var st = getComputedStyle(a);
        var own = (st.overflowX !== "visible" || st.overflowY !== "visible") ? [a] : [];
        clipsOf.set(el, own.concat(clips(a)));
      }
      return clipsOf.get(el);
    }
    function rect(box) {
      if (!rectOf.has(box)) { rectOf.set(box, box.getBoundingClientRect()); }
      return rectOf.get(box);
    }
    function check(node, el, rects) {
      var boxes = clips(el);
      for (var i = 0; i < rects.length; i++) {
        var r = rects[i];
        if (r.width === 0 || r.height === 0) { continue; }
        var where = !inside(r, screen) ? "screen" : null;
        for (var j = 0; !where && j < boxes.length; j++) {
          if (!inside(r, rect(boxes[j]))) { where = boxes[j].tagName + "." + boxes[j].className; }
        }
        if (where) {
          found.push({what: (node.textContent || el.tagName).trim().slice(0, 40), cut_by: where,
                      box: [Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)]});
          return;
        }
      }
    }
    var skip = ".MJX_Assistive_MathML, .MathJax_Preview, .anchor-link, script, style";
    var walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
    var range = document.createRange();
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim() || n.parentElement.closest(skip)) { continue; }
      range.selectNodeContents(n);
      check(n, n.parentElement, range.getClientRects());
    }
    slide.querySelectorAll("img, svg, canvas").forEach(function (e) {
      if (e.closest(skip) || (e.tagName === "svg" && e.parentElement.closest("svg"))) { return; }
      check(e, e, [e.getBoundingClientRect()]);
    });
    return found;
  }
  function measure() {
    var R = window.Reveal;
    R.configure({transition: "none", backgroundTransition: "none"});
    var out = {ready: document.querySelector(".reveal").classList.contains("ready"),
               total: R.getTotalSlides(), size: [R.getConfig().width, R.getConfig().height], slides: []};
    R.getSlides().forEach(function (s) {
      var i = R.getIndices(s);
      R.slide(i.h, i.v);
      var cur = R.getCurrentSlide();
      var screen = document.querySelector(".reveal .slides").getBoundingClientRect();
      out.slides.push({h: i.h, v: i.v, fit: parseFloat(cur.dataset.fit || "NaN"),
                       title: (cur.innerText || "").trim().split("\n")[0].slice(0, 60),
                       problems: problems(cur, screen).slice(0, 5)});
    });
    var views = document.querySelectorAll("div[id^='bertviz-']");
    out.bertviz = {views: views.length, drawn: Array.prototype.filter.call(views, function (v) {
      return v.querySelector("svg line, svg rect");
    }).length};
    report(out);
    // The deck queued a MathJax re-render of every slide visited: work for the eye, after the report.
    if (window.MathJax && MathJax.Hub && MathJax.Hub.queue) { MathJax.Hub.queue.queue.length = 0; }
  }
  function wait(n) {
    if (window.Reveal && window.Reveal.isReady && window.Reveal.isReady()) {
      if (window.MathJax && window.MathJax.Hub) { window.MathJax.Hub.Queue(measure); } else { measure(); }
    } else if (n > 0) {
      setTimeout(function () { wait(n - 1); }, 100);
    } else {
      report({ready: false});
    }
  }
  wait(150);
})();

/* Charts that fit the reader's screen (loaded on every page right after the Vega scripts, book/_ext/offline_assets.py).

   Altair's HTML output calls the global vegaEmbed(element, spec, options) once per chart; this script wraps it. A
   chart is first drawn as the book made it (on a desktop every chart fits its column, which the browser test
   checks). Whenever the room of its output box changes (a phone, a rotated or resized window, a dropdown that
   opens) and the chart does not fit, it is drawn again from its original spec, narrower, in these steps, each
   taken only while the chart is still too wide:

   1. panels stacked: a faceted or concatenated chart gets fewer columns (a row of panels wraps, a grid wider
      than tall is transposed), charts side by side go one above the
      other, legends go under the plot with one entry a line, and titles (the chart's, its subtitle, long axis
      titles) are wrapped to the room;
   2. plots narrowed: every view's width shrinks (to 100 px at the least), text keeps its size;
   3. the last draw: long labels of a vertical band axis (model names) are broken into lines, its rows made taller.

   The chart is never scaled down as a picture, so its text keeps the theme's sizes (lib/page/plotting.py: 11 px
   tick and legend labels, 12 px titles) on every screen; whatever is still wider scrolls inside its output box.
   Colours in dark mode come from charts.css. */
(function () {
  "use strict";

  var embed = window.vegaEmbed;
  if (typeof embed !== "function" || embed.spectralFitted) return;

  var CHAR_PX = {text: 7.8, subtitle: 6.4, axis: 7.2};  // mean width of a character: title (13 px bold), subtitle
                                                         // (11 px), axis title (12 px bold)
  var MIN_PLOT = 100;     // px: a plot narrows to no less than this (or its width in the book, if smaller)
  var MAX_STEPS = 4;      // draws per fit, at most (the last one is step 3)

  function copy(x) { return JSON.parse(JSON.stringify(x)); }

  /* the width the chart may take: its output box's content width, less what vega-embed keeps for its menu */
  function room(el) {
    var box = el.parentElement;
    if (!box || !box.getClientRects().length) return 0;
    var bs = getComputedStyle(box), es = getComputedStyle(el);
    return box.clientWidth - parseFloat(bs.paddingLeft) - parseFloat(bs.paddingRight)
      - parseFloat(es.paddingLeft) - parseFloat(es.paddingRight);
  }

  function drawnWidth(el) {
    var svg = el.querySelector("svg.marks") || el.querySelector("canvas.marks");  // not the menu's icon
    return svg ? svg.getBoundingClientRect().width : 0;
  }

  function drawnHeight(el) {
    var svg = el.querySelector("svg.marks") || el.querySelector("canvas.marks");
    return svg ? svg.getBoundingClientRect().height : 0;
  }

  function wrap(text, chars) {
    var words = String(text).split(/\s+/), lines = [], line = "";
    words.forEach(function (w) {
      if (line && (line + " " + w).length > chars) { lines.push(line); line = w; } else line = line ? line + " " + w : w;
    });
    if (line) lines.push(line);
    return lines;
  }

  function wrapTitle(spec, avail) {
    var t = spec.title;
    if (!t) return;
    if (typeof t === "string" || Array.isArray(t)) t = spec.title = {text: t};
    ["text", "subtitle"].forEach(function (k) {
      if (t[k] === undefined) return;
      var joined = [].concat(t[k]).join(" ");
      var most = Math.max(20, Math.floor(avail / CHAR_PX[k]));
      if (joined.length > most) t[k] = wrap(joined, most);
    });
  }

  /* a legend lists its entries one under the other, under the plot */
  function stackLegends(spec) {
    if (!spec || typeof spec !== "object") return;
    Object.keys(spec.encoding || {}).forEach(function (channel) {
      [].concat(spec.encoding[channel]).forEach(function (def) {
        if (!def || typeof def.legend !== "object" || def.legend === null) return;
        if (def.legend.orient === "left" || def.legend.orient === "right") def.legend.orient = "bottom";
        def.legend.columns = 1;
      });
    });
    ["spec", "layer", "vconcat", "concat", "hconcat"].forEach(function (k) {
      [].concat(spec[k] || []).forEach(stackLegends);
    });
  }

  /* step 1: fewer columns, side by side becomes stacked, titles wrapped (every level of the spec), legends under
     the plot in one column */
  function stack(spec, share, avail, landscape) {
    stackLegends(spec);
    spec.config = spec.config || {};
    spec.config.legend = Object.assign({}, spec.config.legend, {orient: "bottom", columns: 1,
      layout: {bottom: {anchor: "start", direction: "vertical"}}});  // several legends: one under the other
    stackViews(spec, share, avail, landscape);
  }

  function stackViews(spec, share, avail, landscape) {
    if (!spec || typeof spec !== "object") return;
    if (Array.isArray(spec.hconcat)) { spec.vconcat = spec.hconcat; delete spec.hconcat; }
    // a row of panels (facet by column, without rows) becomes a wrapped facet
    var enc = spec.encoding || {};
    if (spec.facet && spec.facet.column && !spec.facet.row) {
      spec.facet = spec.facet.column;
      spec.columns = share < 0.6 ? 1 : 2;
    } else if (spec.facet && spec.facet.column && spec.facet.row && landscape) {  // a grid wider than tall:
      var row = spec.facet.row;                                                    // its columns become rows
      spec.facet.row = spec.facet.column;
      spec.facet.column = row;
    } else if (enc.column && !enc.row) {
      enc.facet = enc.column;
      delete enc.column;
      spec.columns = share < 0.6 ? 1 : 2;
    }
    if (typeof spec.columns === "number" && spec.columns > 1) {
      spec.columns = Math.max(1, Math.floor(spec.columns * share));
    }
    wrapTitle(spec, avail);
    Object.keys(enc).forEach(function (channel) {  // long axis titles on lines
      [].concat(enc[channel]).forEach(function (def) {
        var most = Math.max(20, Math.floor(avail / CHAR_PX.axis));
        if (def && typeof def.title === "string" && def.title.length > most) def.title = wrap(def.title, most);
        if (def && def.axis && typeof def.axis.title === "string" && def.axis.title.length > most) {
          def.axis.title = wrap(def.axis.title, most);
        }
      });
    });
    ["spec", "layer", "vconcat", "concat", "hconcat"].forEach(function (k) {
      [].concat(spec[k] || []).forEach(function (s) { stackViews(s, share, avail, landscape); });
    });
  }

  /* step 3: long labels of a vertical band axis (model names) on lines of about 16 characters, broken at spaces,
     with rows tall enough for three lines */
  function wrapLabels(spec) {
    spec.config = spec.config || {};
    spec.config.axisY = Object.assign({}, spec.config.axisY,
                                      {labelExpr: "split(replace(datum.label, /(.{16,}?) /g, '$1\\n'), '\\n')"});
    function bandY(s) {
      var y = s.encoding && s.encoding.y;
      return (y && (y.type === "nominal" || y.type === "ordinal")) || (s.layer || []).some(bandY);
    }
    (function taller(s) {
      if (!s || typeof s !== "object") return;
      if (s.mark || s.layer) {  // a view (a layer's parts share its height)
        if (!bandY(s)) return;
        if (typeof s.height === "number") s.height = Math.round(s.height * 2.4);
        else if (s.height && typeof s.height.step === "number") s.height = {step: Math.round(s.height.step * 2.4)};
        else if (s.height === undefined && s.mark) s.height = {step: 44};
        return;
      }
      ["spec", "vconcat", "concat", "hconcat"].forEach(function (k) { [].concat(s[k] || []).forEach(taller); });
    })(spec);
  }

  /* step 2: every view's numeric width times share (a plot keeps at least MIN_PLOT px) */
  function narrow(spec, share) {
    if (!spec || typeof spec !== "object") return;
    if (typeof spec.width === "number") spec.width = Math.max(Math.min(spec.width, MIN_PLOT), Math.round(spec.width * share));
    ["spec", "layer", "vconcat", "concat", "hconcat"].forEach(function (k) {
      [].concat(spec[k] || []).forEach(function (s) { narrow(s, share); });
    });
  }

  function Chart(el, spec, opt) {
    this.el = el;
    this.spec = spec;      // as the book made it
    this.opt = opt;
    this.result = null;
    this.drawn = null;     // the spec drawn now
    this.stacked = false;  // whether step 1 was taken on it
    this.fittedTo = null;  // the room of the last fit
    this.busy = null;
    this.pending = false;
  }

  Chart.prototype.draw = function (spec, stacked) {
    var self = this, before = {spec: self.drawn, stacked: self.stacked};
    if (self.result) { self.result.finalize(); self.el.innerHTML = ""; self.result = null; }
    self.drawn = spec;
    self.stacked = stacked;
    return embed(self.el, copy(spec), self.opt).then(function (result) { self.result = result; return result; },
      function (err) {  // a narrower spec Vega-Lite cannot draw: the one drawn before, and no further steps
        if (!before.spec) throw err;
        console.warn("chart fit: " + err);
        self.el.innerHTML = "";
        return self.draw(before.spec, before.stacked).then(function () { throw err; });
      });
  };

  /* draw the chart narrower until it fits its room (or MAX_STEPS draws are spent), starting from the book's spec
     whenever the room changed */
  Chart.prototype.fit = function () {
    var self = this, avail = room(self.el);
    if (window.matchMedia && window.matchMedia("print").matches) return Promise.resolve();  // print.css fits them
    if (avail <= 0 || (self.fittedTo !== null && Math.abs(avail - self.fittedTo) < 2)) return Promise.resolve();
    var steps = 0;
    self.fittedTo = avail;
    function next() {
      var need = drawnWidth(self.el);
      if (need <= avail + 1 || steps >= MAX_STEPS) return null;
      steps += 1;
      var spec = copy(self.drawn), share = avail / need;
      if (!self.stacked) stack(spec, share, avail, need > drawnHeight(self.el));
      else if (steps === MAX_STEPS) wrapLabels(spec);
      else narrow(spec, share * 0.95);
      return self.draw(spec, true).then(next);
    }
    return (self.drawn !== self.spec ? self.draw(self.spec, false) : Promise.resolve()).then(next);
  };

  Chart.prototype.refit = function () {
    var self = this;
    if (self.busy) { self.pending = true; return; }
    self.busy = self.fit().catch(function () { /* drawn as before (draw), nothing more to do */ }).then(function () {
      self.busy = null;
      if (self.pending) { self.pending = false; self.refit(); }
    });
  };

  var charts = [];
  var observer = typeof ResizeObserver === "function" ? new ResizeObserver(function (entries) {
    entries.forEach(function (entry) { if (entry.target.spectralChart) entry.target.spectralChart.refit(); });
  }) : null;

  function fitted(el, spec, opt) {
    if (typeof el === "string") el = document.querySelector(el);
    if (!el || !spec || typeof spec !== "object" || (opt && opt.mode && opt.mode !== "vega-lite")) {
      return embed.apply(this, arguments);
    }
    var chart = new Chart(el, copy(spec), opt);
    charts.push(chart);
    return chart.draw(chart.spec, false).then(function (result) {
      var box = el.parentElement;
      if (box && observer) { box.spectralChart = chart; observer.observe(box); }
      else chart.refit();
      return result;
    });
  }

  /* how many charts are being drawn again now (the browser test waits for none) */
  fitted.refitting = function () { return charts.filter(function (c) { return c.busy; }).length; };
  fitted.spectralFitted = true;
  Object.keys(embed).forEach(function (k) { fitted[k] = embed[k]; });
  window.vegaEmbed = fitted;
})();

/* Search results without raw LaTeX (loaded on every page by _config.yml; it acts on the search page only).

   Sphinx's search shows, under each hit, about 240 characters of the page's text, read from its HTML before
   MathJax typesets it, so a snippet read "the ratio \(|\lambda_2|/|\lambda_1|\) of ...". Each snippet (p.context
   in #search-results) is rewritten as plain text as it appears: the math delimiters go, common TeX commands
   become their characters (λ, ‖, ≤, ᵀ, ℝ), \frac{a}{b} becomes a/b, sub- and superscripts of digits and
   most small letters become Unicode ones (others read _(…) and ^(…)), fonts and accents keep their argument only,
   other commands their name (\min, \log), and braces go. */
(function () {
  "use strict";

  var SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", Gamma: "Γ", delta: "δ", Delta: "Δ", epsilon: "ε", varepsilon: "ε",
    zeta: "ζ", eta: "η", theta: "θ", Theta: "Θ", kappa: "κ", lambda: "λ", Lambda: "Λ", mu: "μ", nu: "ν", xi: "ξ",
    pi: "π", rho: "ρ", sigma: "σ", Sigma: "Σ", tau: "τ", phi: "φ", varphi: "φ", Phi: "Φ", chi: "χ", psi: "ψ",
    Psi: "Ψ", omega: "ω", Omega: "Ω", ell: "ℓ", top: "ᵀ", intercal: "ᵀ", dagger: "†", lVert: "‖", rVert: "‖",
    Vert: "‖", "|": "‖", lvert: "|", rvert: "|", vert: "|", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠",
    approx: "≈", sim: "∼", simeq: "≃", propto: "∝", equiv: "≡", in: "∈", notin: "∉", subset: "⊂", subseteq: "⊆",
    cup: "∪", cap: "∩", times: "×", cdot: "·", cdots: "⋯", ldots: "…", dots: "…", pm: "±", mp: "∓", infty: "∞",
    to: "→", rightarrow: "→", leftarrow: "←", mapsto: "↦", Rightarrow: "⇒", iff: "⇔", sum: "∑", prod: "∏",
    int: "∫", partial: "∂", nabla: "∇", sqrt: "√", circ: "∘", otimes: "⊗", oplus: "⊕", langle: "⟨", rangle: "⟩",
    lfloor: "⌊", rfloor: "⌋", lceil: "⌈", rceil: "⌉", forall: "∀", exists: "∃", emptyset: "∅", quad: " ",
    qquad: " ", ",": " ", ";": " ", ":": " ", "!": "", "{": "{", "}": "}", "%": "%", "_": "_", "&": "&", "#": "#"
  };
  var SETS = {R: "ℝ", C: "ℂ", N: "ℕ", Z: "ℤ", Q: "ℚ", E: "𝔼", P: "ℙ"};
  var SUB = {"0": "₀", "1": "₁", "2": "₂", "3": "₃", "4": "₄", "5": "₅", "6": "₆", "7": "₇", "8": "₈", "9": "₉",
             "+": "₊", "-": "₋", "=": "₌", "(": "₍", ")": "₎", a: "ₐ", e: "ₑ", h: "ₕ", i: "ᵢ", j: "ⱼ", k: "ₖ", l: "ₗ",
             m: "ₘ", n: "ₙ", o: "ₒ", p: "ₚ", r: "ᵣ", s: "ₛ", t: "ₜ", u: "ᵤ", v: "ᵥ", x: "ₓ"};
  var SUP = {"0": "⁰", "1": "¹", "2": "²", "3": "³", "4": "⁴", "5": "⁵", "6": "⁶", "7": "⁷", "8": "⁸", "9": "⁹",
             "+": "⁺", "-": "⁻", "−": "⁻", "=": "⁼", "(": "⁽", ")": "⁾", i: "ⁱ", n: "ⁿ", T: "ᵀ", "*": "*", "′": "′", "ᵀ": "ᵀ"};

  function script(text, table, mark) {
    var chars = text.split("");
    return chars.every(function (c) { return table[c]; }) ? chars.map(function (c) { return table[c]; }).join("")
      : mark + (text.length > 1 ? "(" + text + ")" : text);
  }

  /* plain text for a piece of TeX (or text holding some) */
  /* commands whose name goes (accents, fonts, spacing); any other unknown command keeps its name (\min, \log) */
  var SILENT = /^(?:hat|tilde|bar|vec|dot|ddot|widehat|widetilde|overline|underline|mathrm|mathit|mathsf|mathcal|mathbf|text|textrm|textit|textbf|operatorname|mbox|boldsymbol|bm|displaystyle|textstyle|scriptstyle|limits|nolimits|label|tag|nonumber|notag|begin|end|hline|color)$/;

  function plain(tex) {
    var s = tex.replace(/\\[()[\]]/g, "")                                          // \( \) \[ \]
      .replace(/\\(?:mathbb|mathbf|boldsymbol|bm)\{([A-Z])\}/g, function (m, c) { return SETS[c] || c; })
      .replace(/\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])/g, "")
      .replace(/\\sqrt\{([^{}]*)\}/g, function (m, a) { return "√" + (a.length > 1 ? "(" + a + ")" : a); })
      .replace(/\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}/g, function (m, a, b) {
        return (a.length > 1 ? "(" + a + ")" : a) + "/" + (b.length > 1 ? "(" + b + ")" : b); })
      .replace(/\\([A-Za-z]+|[|,;:!{}%_&#])/g, function (m, name) {              // named commands
        if (Object.prototype.hasOwnProperty.call(SYMBOLS, name)) return SYMBOLS[name];
        return SILENT.test(name) ? "" : name;
      })
      .replace(/\{([^{}_^]*)\}/g, function (m, inner, at, whole) {                // a group not after _ or ^
        return /[_^]$/.test(whole.slice(0, at)) ? m : inner;
      });
    for (var i = 0; i < 3; i++) {                                                 // braced sub/superscripts, inner first
      s = s.replace(/_\{([^{}]*)\}/g, function (m, a) { return script(a, SUB, "_"); })
        .replace(/\^\{([^{}]*)\}/g, function (m, a) { return script(a, SUP, "^"); });
    }
    s = s.replace(/_([A-Za-z0-9+\-])/g, function (m, a) { return script(a, SUB, "_"); })
      .replace(/\^([A-Za-z0-9+\-*′ᵀ])/g, function (m, a) { return script(a, SUP, "^"); });
    return s.replace(/[{}$]/g, "").replace(/\s+/g, " ");
  }

  function mend(p) {
    if (p.dataset.plain) return;
    p.dataset.plain = "1";
    if (/\\[A-Za-z()[\]|]|[_^]\{/.test(p.textContent)) p.textContent = plain(p.textContent);
  }

  function start() {
    var results = document.getElementById("search-results");
    if (!results) return;
    results.querySelectorAll("p.context").forEach(mend);
    new MutationObserver(function () { results.querySelectorAll("p.context").forEach(mend); })
      .observe(results, {childList: true, subtree: true});
  }

  window.spectralPlainTex = plain;  // for the browser test
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

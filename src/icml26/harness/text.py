"""Text a reader sees: inline LaTeX as Unicode (``$\\chi^2$`` -> ``χ²``) and inline Markdown as plain text or HTML.

Used by the report, the CLI (``icml26 show``) and anything else that prints the papers' abstracts, claims and
README headings; no dependencies beyond the standard library, so the CLI stays fast to start.
"""

from __future__ import annotations

import re

__all__ = ["latex_to_text", "markdown_to_text", "markdown_emphasis_html"]

_GREEK = dict(alpha="α", beta="β", gamma="γ", delta="δ", epsilon="ε", varepsilon="ε", zeta="ζ", eta="η", theta="θ",
              vartheta="ϑ", iota="ι", kappa="κ", lambda_="λ", mu="μ", nu="ν", xi="ξ", pi="π", rho="ρ", sigma="σ",
              tau="τ", upsilon="υ", phi="φ", varphi="φ", chi="χ", psi="ψ", omega="ω", Gamma="Γ", Delta="Δ",
              Theta="Θ", Lambda="Λ", Xi="Ξ", Pi="Π", Sigma="Σ", Upsilon="Υ", Phi="Φ", Psi="Ψ", Omega="Ω")
_GREEK["lambda"] = _GREEK.pop("lambda_")
_SYMBOLS = {**_GREEK, "times": "×", "cdot": "·", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "neq": "≠", "ne": "≠",
            "approx": "≈", "sim": "∼", "simeq": "≃", "propto": "∝", "infty": "∞", "in": "∈", "notin": "∉",
            "subset": "⊂", "subseteq": "⊆", "to": "→", "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒",
            "mapsto": "↦", "pm": "±", "mp": "∓", "ell": "ℓ", "partial": "∂", "nabla": "∇", "sum": "Σ", "prod": "Π",
            "int": "∫", "cdots": "⋯", "ldots": "…", "dots": "…", "forall": "∀", "exists": "∃", "langle": "⟨",
            "rangle": "⟩", "Vert": "‖", "lVert": "‖", "rVert": "‖", "|": "‖", "mid": "|", "top": "⊤", "circ": "∘",
            "star": "⋆", "ast": "∗", "odot": "⊙", "otimes": "⊗", "oplus": "⊕", "emptyset": "∅", "lfloor": "⌊",
            "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "%": "%", "$": "$", "&": "&", "#": "#", "_": "_",
            "{": "{", "}": "}", ",": " ", ";": " ", ":": " ", "!": "", " ": " ", "quad": " ", "qquad": "  ",
            "left": "", "right": "", "big": "", "Big": "", "bigl": "", "bigr": "", "displaystyle": "", "limits": ""}
_BB = dict(zip("RNZQCEP", "ℝℕℤℚℂ𝔼ℙ"))
_CAL = dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "𝒜ℬ𝒞𝒟ℰℱ𝒢ℋℐ𝒥𝒦ℒℳ𝒩𝒪𝒫𝒬ℛ𝒮𝒯𝒰𝒱𝒲𝒳𝒴𝒵"))
_SUP = dict(zip("0123456789+-=()abcdefghijklmnoprstuvwxyzTn", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻᵀⁿ"))
_SUB = dict(zip("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
_MATH = re.compile(r"(?<![\\$])\$(?!\s)([^$\n]{1,300}?)(?<![\s\\])\$(?!\d)")
# math that cannot be a price: a command (``8$\times$7B``) or a lone operator (``($<$0.5%)``), digits may follow
_MATH_SURE = re.compile(r"(?<![\\$])\$(\\[A-Za-z]+|[<>=~+\-]|\\[A-Za-z]+\{[^{}$]*\})\$")
_ARG = r"(\{[^{}]*\}|\\?[A-Za-z0-9])"


def _strip(arg: str) -> str:
    return arg[1:-1] if arg.startswith("{") and arg.endswith("}") else arg


def _script(arg: str, table: dict[str, str], mark: str) -> str:
    body = _strip(arg).strip()
    if body and all(ch in table for ch in body):
        return "".join(table[ch] for ch in body)
    return f"{mark}{body}" if len(body) == 1 else f"{mark}\x02{body}\x03"  # marks become ^(...) at the end


def _paren(x: str) -> str:
    x = x.strip()
    return x if re.fullmatch(r"[\w.′]+", x) else f"({x})"


def _math_to_text(m: str) -> str:
    # symbols without arguments first (so that \frac{1}{\epsilon} sees ε), commands with arguments innermost-first
    s = re.sub(r"\\([A-Za-z]+|[^A-Za-z])", lambda g: _SYMBOLS.get(g.group(1), g.group(0)), m)
    for _ in range(8):
        prev = s
        s = re.sub(r"\\[dt]?frac\s*" + _ARG + r"\s*" + _ARG,
                   lambda g: f"{_paren(_strip(g.group(1)))}/{_paren(_strip(g.group(2)))}", s)
        s = re.sub(r"\\sqrt\s*" + _ARG, lambda g: "√" + _paren(_strip(g.group(1))), s)
        s = re.sub(r"\\mathbb\s*" + _ARG, lambda g: "".join(_BB.get(c, c) for c in _strip(g.group(1))), s)
        s = re.sub(r"\\mathcal\s*" + _ARG, lambda g: "".join(_CAL.get(c, c) for c in _strip(g.group(1))), s)
        s = re.sub(r"\\(?:mathbf|mathrm|mathit|mathsf|boldsymbol|bm|text|textbf|textit|operatorname|mbox|hat|bar|"
                   r"tilde|widehat|widetilde|overline)\s*" + _ARG, lambda g: _strip(g.group(1)), s)
        s = re.sub(r"\^\s*(\{[^{}\\]*\}|[^\s{}\\\x02\x03])", lambda g: _script(g.group(1), _SUP, "\x00"), s)
        s = re.sub(r"_\s*(\{[^{}\\]*\}|[^\s{}\\\x02\x03])", lambda g: _script(g.group(1), _SUB, "\x01"), s)
        if s == prev:
            break
    s = re.sub(r"\\([A-Za-z]+)", lambda g: "√" if g.group(1) == "sqrt" else g.group(1), s)  # unknown: its name
    s = s.replace("{", "").replace("}", "").replace("\x00", "^").replace("\x01", "_")
    s = s.replace("\x02", "(").replace("\x03", ")")
    return re.sub(r"\s+", " ", s).strip()


def latex_to_text(text: str) -> str:
    """Inline LaTeX (``$...$``) as plain Unicode text: ``$\\chi^2$`` -> ``χ²``, ``$O(d^{\\frac32})$`` -> ``O(d^(3/2))``;
    outside math, ``--`` between words becomes an en dash and ``\\%`` a percent sign. Text without math is
    returned unchanged (a lone ``$`` such as a price stays)."""
    if not text:
        return text or ""
    out = _MATH_SURE.sub(lambda g: _math_to_text(g.group(1)), text)
    out = _MATH.sub(lambda g: _math_to_text(g.group(1)), out)
    out = re.sub(r"(?<=\w)--(?=\w)", "–", out)
    return out.replace("\\%", "%")


def markdown_to_text(text: str) -> str:
    """Inline Markdown as plain text: ``code`` and *emphasis* marks dropped, ``[text](url)`` as its text."""
    s = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text or "")
    s = re.sub(r"`([^`]*)`", r"\1", s)
    return re.sub(r"(\*\*|\*|__)(?=\S)(.+?)(?<=\S)\1", r"\2", s)


def markdown_emphasis_html(escaped: str) -> str:
    """``*emphasis*`` and ``**strong**`` in already HTML-escaped text as ``<em>`` / ``<strong>``."""
    s = re.sub(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"<em>\1</em>", s)

"""An mkdocs hook: the reST roles of the docstrings (``:func:`name```) shown as code, as Sphinx shows them.

mkdocstrings renders the role's name as text before the code (``:func:<code>name</code>``); this drops it, and a
``~`` path keeps its last name (``:class:`~a.b.C``` reads ``C``).
"""

import re

ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):<code>(~?)([^<]*)</code>")


def on_page_content(html: str, **kwargs: object) -> str:
    """The page's HTML with every rendered role reduced to its code."""
    return ROLE.sub(lambda m: f"<code>{m[2].rsplit('.', 1)[-1] if m[1] else m[2]}</code>", html)

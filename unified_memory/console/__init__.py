"""The web console: see, search and correct what the agent remembers, in a browser.

``unified-memory serve`` serves it at ``/ui`` beside the JSON API (``ServiceSettings.console``);
``unified-memory ui --db FILE`` opens one on loopback for a local file. People sign in with an
API key: a user's key shows that user, an admin key lists the users and picks one.

The stack is the smallest that does the job: pages rendered on the server with Jinja2 (which
escapes every value by default: stored text is attacker-controlled), plain HTML forms, charts
and the graph drawn as inline SVG on the server, one stylesheet, and no JavaScript at all. So
nothing is built to install or test it, every asset comes from the installed package (it works
offline), and the Content-Security-Policy can forbid scripts and inline styles outright
(``docs/console.md``).

Rooms: :mod:`~unified_memory.console.security` (headers, cookies, form tokens),
:mod:`~unified_memory.console.signin` (who is looking), :mod:`~unified_memory.console.drawing`
(chart and graph geometry), :mod:`~unified_memory.console.reads` (what the pages show, read on
the user's lane), :mod:`~unified_memory.console.pages` (the pages),
:mod:`~unified_memory.console.actions` (edit, forget, export), :mod:`~unified_memory.console.app`
(the routes, mounted on the service).
"""

from unified_memory.console.app import CONSOLE_PATH, install_console

__all__ = ["install_console", "CONSOLE_PATH"]

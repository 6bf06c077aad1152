"""The metrics client commands (issue 14 part 2): ``servemetrics model …``, ``servemetrics loops …`` and
``servemetrics events``, with the platform CLI's commands, flags, checks, output and exit codes
(platform-facts §3, §5 "Error responses"). They talk to a running service over HTTP only: nothing here
imports the server's layers. docs/cli.md describes them.

Modules: ``api`` (HTTP calls, errors and exit codes), ``settings`` (URL and key: flags, environment,
profile file), ``window`` (the window flags and their checks), ``tables`` and ``charts`` (renderers),
``loops_view`` (the Loops answer as series), ``options`` (the shared flags), ``metrics_cmds`` and
``list_cmds`` (the commands), ``apps`` (the Typer sub-apps ``cli.py`` registers).
"""

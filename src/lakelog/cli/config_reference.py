"""docs/configuration.md, generated from the code: every field of `Settings` with its default,
env var, `lakelog serve` flag, `lakelog.toml` key and meaning (the field's docstring), grouped
by the section comments of `lakelog/config.py`; then the topic configs Lakelog honours.

    python -m lakelog.cli.config_reference > docs/configuration.md   (or: make docs)
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from lakelog import config
from lakelog.config import MiB, Settings

REGENERATE = "make docs"
"""The command that rewrites docs/configuration.md (tests name it when the file is stale)."""


@dataclass(frozen=True)
class FieldDoc:
    name: str
    group: str
    doc: str


def field_docs() -> list[FieldDoc]:
    """The fields of `Settings` in source order, each with its section (the last `# ...`
    comment line above it in the class) and its docstring (or `description=`)."""
    source = inspect.getsource(config)
    tree = ast.parse(source)
    cls = next(
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == Settings.__name__
    )
    lines = source.splitlines()
    headings: dict[int, str] = {}
    for number in range(cls.lineno, cls.end_lineno or cls.lineno):
        match = re.fullmatch(r" {4}# (.+)", lines[number - 1])
        if match:
            headings[number] = match.group(1).strip()
    found: list[FieldDoc] = []
    body = cls.body
    for index, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name not in Settings.model_fields:
            continue
        above = [line for line in headings if line < node.lineno]
        group = headings[max(above)] if above else "general"
        doc = ""
        following = body[index + 1] if index + 1 < len(body) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            doc = following.value.value
        doc = Settings.model_fields[name].description or doc
        found.append(FieldDoc(name, group, " ".join(doc.split())))
    return found


def _commands(command: Any) -> dict[str, Any]:
    """The subcommands of a (typer) command group, by name."""
    return dict(command.commands)


def _root() -> Any:
    from lakelog.cli.main import app

    return typer.main.get_command(app)


def serve_flags() -> dict[str, str]:
    """Setting name -> its `lakelog serve` flag (options named as the setting they set)."""
    serve = _commands(_root())["serve"]
    return {
        param.name: param.opts[0]
        for param in serve.params
        if param.name in Settings.model_fields and param.opts
    }


def _ms(value: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if value >= size and value % size == 0:
            return f"{value // size} {unit}"
    return ""


def show_default(name: str, value: object) -> str:
    """A default as it would be written in lakelog.toml, with a readable size or duration."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'
    if isinstance(value, int):
        shown = f"`{value}`"
        if "_bytes" in name and value >= MiB and value % MiB == 0:
            return f"{shown} ({value // MiB} MiB)"
        if name.endswith("_ms") and _ms(value):
            return f"{shown} ({_ms(value)})"
        if name.endswith("_minutes") and value >= 60 and _ms(value * 60_000):
            return f"{shown} ({_ms(value * 60_000)})"
        return shown
    return f"`{value}`"


def _cell(text: str) -> str:
    """`text` for a table cell: `|` escaped, and `<`/`>` outside code spans (not HTML tags)."""
    parts = text.replace("|", "\\|").split("`")
    for index in range(0, len(parts), 2):
        parts[index] = parts[index].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _title(group: str) -> str:
    """A section comment without its parenthesis, capitalised: `# produce (...)` -> Produce."""
    title = group.split(" (", 1)[0].strip()
    return title[0].upper() + title[1:]


def _note(group: str) -> str:
    """The parenthesis of a section comment, if any, as a sentence."""
    _, sep, rest = group.partition(" (")
    if not sep:
        return ""
    note = rest.removesuffix(")").strip()
    return note[0].upper() + note[1:] + "."


INTRO = """\
# Configuration reference

<!-- Generated from src/lakelog/config.py by `{regenerate}`
     (python -m lakelog.cli.config_reference): edit the code, not this file. -->

A broker (`lakelog serve`) takes each setting below from, first to last:

1. its command-line flag, for the few settings that have one;
2. the environment variable `{prefix}<NAME>` (the setting's name in capitals, e.g.
   `{prefix}NUM_PARTITIONS`);
3. the key of the same name in `{toml}`, a TOML file read from the working directory
   (a key it does not know is an error, with a suggestion);
4. the default.

So flags override env `{prefix}*`, which override `{toml}`. Booleans are `true` or `false`,
sizes are bytes, durations are milliseconds (`_ms`) or minutes (`_minutes`). A value that does
not validate stops the broker at start with one line naming the setting and where it came from.
`lakelog pipeline` jobs read the same settings; they take {pipeline_flags} as flags.

For example, this `{toml}`:

```toml
listen = "0.0.0.0:9092"
num_partitions = 3
```

and `{prefix}NUM_PARTITIONS=6` in the environment give 6 partitions to new topics; started
with `--listen 127.0.0.1:9093`, the broker listens there rather than on the file's address.
"""


def pipeline_flags() -> list[str]:
    """The flags `lakelog pipeline` jobs take that set a setting."""
    flags: list[str] = []
    for command in _commands(_commands(_root())["pipeline"]).values():
        for param in command.params:
            if param.name in Settings.model_fields and param.opts and param.opts[0] not in flags:
                flags.append(param.opts[0])
    return flags


def settings_section() -> list[str]:
    prefix = str(Settings.model_config.get("env_prefix", ""))
    toml = str(Settings.model_config.get("toml_file", config.TOML_FILE))
    flags = serve_flags()
    pipeline = [f"`{flag}`" for flag in pipeline_flags()]
    pipeline_text = (
        ", ".join(pipeline[:-1]) + " and " + pipeline[-1]
        if len(pipeline) > 1
        else "".join(pipeline)
    )
    out = [
        INTRO.format(
            regenerate=REGENERATE, prefix=prefix, toml=toml, pipeline_flags=pipeline_text or "none"
        )
    ]
    groups: dict[str, list[FieldDoc]] = {}
    for field in field_docs():
        groups.setdefault(field.group, []).append(field)
    out.append("## Broker settings\n")
    out.append("Sections: " + ", ".join(f"[{_title(g)}](#{_anchor(g)})" for g in groups) + ".\n")
    for group, fields in groups.items():
        out.append(f"### {_title(group)}\n")
        if _note(group):
            out.append(_cell(_note(group)) + "\n")
        out.append("| Setting (`lakelog.toml` key) | Default | Env var | Flag | Meaning |")
        out.append("|---|---|---|---|---|")
        for field in fields:
            default = show_default(field.name, Settings.model_fields[field.name].default)
            env = f"`{prefix}{field.name.upper()}`"
            flag = f"`{flags[field.name]}`" if field.name in flags else ""
            out.append(
                f"| `{field.name}` | {default} | {env} | {flag} | {_cell(field.doc or '')} |"
            )
        out.append("")
    return out


def _anchor(group: str) -> str:
    """GitHub's heading anchor for `### <group>`."""
    text = re.sub(r"[^\w\- ]", "", _title(group).lower())
    return text.replace(" ", "-")


def topic_section() -> list[str]:
    """The topic configs that change behaviour, with their defaults, and those accepted only."""
    from lakelog.log import topic_config

    defaults = topic_config.defaults(Settings.model_construct())
    out = [
        "## Topic configs\n",
        "Set per topic with CreateTopics or IncrementalAlterConfigs (`lakelog topics create "
        "--config`, `lakelog configs`, Kafka's tools). These change what Lakelog does; "
        "defaults shown are those of the broker settings' defaults:\n",
        "| Topic config | Default |",
        "|---|---|",
    ]
    for name in topic_config.VALIDATORS:
        out.append(f"| `{name}` | `{defaults.get(name, '')}` |")
    out.append("")
    accepted = sorted(topic_config.ACCEPTED)
    out.append(
        "Accepted and stored so that tools which set them keep working, without effect: "
        + ", ".join(f"`{name}`" for name in accepted)
        + ". Any other name is refused.\n"
    )
    return out


def render() -> str:
    return "\n".join([*settings_section(), *topic_section()]).rstrip("\n") + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()

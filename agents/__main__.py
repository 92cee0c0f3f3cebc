"""`python -m agents KIND --name NAME ...` runs an agent service; `python -m agents llm serve` the LLM server;
the `spielbus cwm` and `spielbus selfplay` commands hand over to `python -m research.cwm` / `research.coach`.

The `spielbus agent` and `spielbus llm` commands hand over to this entry point, so the
referee side never imports agent code.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["llm"]:
        from agents.llm.server import main as llm_main

        rest = args[1:]
        if rest[:1] == ["serve"]:
            rest = rest[1:]
        return llm_main(rest)
    from agents.cli import main as agent_main

    return agent_main(args)


if __name__ == "__main__":
    sys.exit(main())

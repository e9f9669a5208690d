"""The bundled demo MCP server "demo": workspace files, arithmetic, a slow echo and a tool that fails.

Run it with ``python -m phasegraph.tools.mcp.demo_server --root DIR [--transport stdio|streamable-http]``.
Every tool is safe to hand to a model: files are confined to ``--root`` (symlinks included), arithmetic
is parsed, never evaluated, and sleeping is capped.

No ``from __future__ import annotations`` here: FastMCP reads the tools' type hints (with their
``Field`` descriptions) to build the input schemas the model is shown.
"""

import argparse
import ast
import asyncio
import math
import operator
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from pydantic import Field

from phasegraph.tools.context import ToolContext
from phasegraph.tools.files import list_folder, read_text

#: Longest expression ``calculate`` parses, in characters.
MAX_EXPRESSION_CHARS = 200
#: Largest magnitude (in decimal digits) of any intermediate result of ``calculate``.
MAX_DIGITS = 1000
#: Longest ``slow_echo`` sleep, in milliseconds.
MAX_SLEEP_MS = 10_000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}

PathArg = Annotated[str, Field(description="A path relative to the workspace root, e.g. 'docs/notes.md'.")]


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression, computed from its syntax tree without ``eval``.

    Only numbers, ``+ - * / // % **``, unary ``+``/``-`` and parentheses are allowed. A power whose
    result would exceed ``MAX_DIGITS`` digits is refused before it is computed (``9**9**9`` would
    take minutes); any other result is checked as soon as it is computed.

    Raises:
        ValueError: The expression is too long, not arithmetic, divides by zero or is too large.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression ({exc.msg})") from None
    try:
        return _value(tree.body)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError(f"the result is too large (more than {MAX_DIGITS} digits)") from None


def _value(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(node.value)
    if isinstance(node, ast.Constant):
        raise ValueError(f"{node.value!r} is not a number")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _bounded(_UNARY[type(node.op)](_value(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        return _bounded(_BINARY[type(node.op)](left, right))
    raise ValueError(f"{type(node).__name__} is not allowed: only numbers and + - * / // % ** ( )")


def _check_power(base: int | float, exponent: int | float) -> None:
    """Refuse ``base ** exponent`` when its result would be too large to compute cheaply."""
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > MAX_DIGITS:
        raise OverflowError
    if base < 0 and not float(exponent).is_integer():
        raise ValueError("a negative number to a fractional power is not a real number")


def _bounded(value: Any) -> int | float:
    if isinstance(value, int) and value.bit_length() > MAX_DIGITS * math.log2(10):
        raise OverflowError
    if isinstance(value, float) and not math.isfinite(value):
        raise OverflowError
    return value


def build_server(root: Path, *, host: str = "127.0.0.1", port: int = 8000) -> FastMCP:
    """The demo server, its file tools confined to ``root``."""
    context = ToolContext(workspace=root.resolve(), project_id="mcp", request_id="mcp")
    server = FastMCP(
        "demo",
        instructions="Demo tools: workspace files, arithmetic, a slow echo and a tool that always fails.",
        host=host,
        port=port,
        log_level="WARNING",  # INFO logs every request on stderr, which the client shows
    )

    @server.tool(structured_output=False)
    def list_files(path: PathArg = ".") -> str:
        """List the files and folders directly inside a workspace folder (folders end with '/')."""
        return list_folder(context, path)

    @server.tool(structured_output=False)
    def read_file(path: PathArg) -> str:
        """Read a UTF-8 text file from the workspace; long files are truncated."""
        return read_text(context, path)

    @server.tool(structured_output=False)
    def calculate(
        expression: Annotated[
            str, Field(description="Arithmetic such as '(2 + 3) * 4 / 5' or '2 ** 10 % 7'.")
        ],
    ) -> str:
        """Compute an arithmetic expression: numbers, + - * / // % **, unary +/- and parentheses."""
        return repr(evaluate(expression))

    @server.tool(structured_output=False)
    async def slow_echo(
        text: Annotated[str, Field(description="The text to return.")],
        ms: Annotated[
            int, Field(ge=0, le=MAX_SLEEP_MS, description="How long to wait first, in milliseconds.")
        ],
    ) -> str:
        """Wait ms milliseconds, then return the text unchanged (for testing timing and timeouts)."""
        await asyncio.sleep(ms / 1000)
        return text

    @server.tool(structured_output=False)
    def always_fails(
        reason: Annotated[
            str, Field(description="The error message to fail with.")
        ] = "this tool always fails",
    ) -> str:
        """Fail with the given reason every time (for testing how tool errors are reported)."""
        raise RuntimeError(reason)

    return server


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and serve until the client (stdio) or a signal (HTTP) stops us."""
    parser = argparse.ArgumentParser(prog="python -m phasegraph.tools.mcp.demo_server", description=__doc__)
    parser.add_argument("--root", type=Path, required=True, help="the folder the file tools are confined to")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http only")
    parser.add_argument("--port", type=int, default=8000, help="streamable-http only")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"--root {str(args.root)!r} is not a folder")
    build_server(args.root, host=args.host, port=args.port).run(args.transport)


if __name__ == "__main__":
    main()

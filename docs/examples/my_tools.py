"""The Python tools ``phasegraph.toml`` names (``mine = "my_tools:TOOLS"``), in a module beside it.

A module beside the project file imports without setting ``PYTHONPATH``. A plain function becomes a tool
(LangChain's ``tool``): its name is the tool's, its docstring the description, its type hints the parameters.
"""


def word_count(text: str) -> str:
    """Count the words of a text."""
    return f"{len(text.split())} words"


def title_case(text: str) -> str:
    """Write a text with each word capitalised, as a title."""
    return text.title()


#: The tools the project file names, as one list.
TOOLS = [word_count, title_case]

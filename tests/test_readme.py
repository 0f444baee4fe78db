"""The README's Python quickstart runs as written."""

import re
from pathlib import Path

README = Path(__file__).parent.parent / "README.md"


def test_readme_quickstart_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "the README has no Python quickstart"
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert float(out[0].split()[0]) > 0.9  # training accuracy of BKMSVC
    assert float(out[1].split()[0]) > 0.9  # R^2 of BKRR2

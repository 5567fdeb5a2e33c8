"""Run a notebook headless with nbclient, as a user would: in its own folder,
top to bottom, on the python3 kernel of the interpreter running this script.

    python tools/run_notebook.py NOTEBOOK [--quick] [--data-dir DIR] [--install-only]

--quick and --data-dir set the notebook's parameters (QUICK = True,
DATA_DIR) in a cell inserted after the one tagged "parameters", as papermill
does; no cell of the notebook is edited.  --install-only runs the cells up to
and including the install cell (the one that sets TRACEML_SOURCE).

Prints what the install cell printed, then how many code cells ran;
exits 1 on the first cell that raises, with its error.  tools/check_dist.sh
uses it to run the notebook from a built wheel, in a venv where traceml is
not yet installed.
"""

import argparse
import os
import sys

import nbclient
import nbformat


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o["output_type"] == "stream":
            out.append(o["text"])
        elif o["output_type"] == "error":
            out.append("\n".join(o["traceback"]) + "\n")
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook")
    ap.add_argument("--quick", action="store_true", help="QUICK = True")
    ap.add_argument("--data-dir", help="DATA_DIR, where the demo dataset is built")
    ap.add_argument("--install-only", action="store_true",
                    help="stop after the install cell")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = ap.parse_args()

    path = os.path.abspath(args.notebook)
    nb = nbformat.read(path, as_version=4)
    install = [i for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and "TRACEML_SOURCE =" in c.source]
    if len(install) != 1:
        print(f"run_notebook: {len(install)} install cells in {path}", file=sys.stderr)
        return 2
    if args.install_only:
        nb.cells = nb.cells[: install[0] + 1]
    else:
        params = [i for i, c in enumerate(nb.cells)
                  if "parameters" in c.metadata.get("tags", [])]
        lines = []
        if args.quick:
            lines.append("QUICK = True")
        if args.data_dir:
            lines.append(f"DATA_DIR = {os.path.abspath(args.data_dir)!r}")
        if lines:
            if len(params) != 1:
                print(f"run_notebook: {len(params)} parameters cells in {path}",
                      file=sys.stderr)
                return 2
            cell = nbformat.v4.new_code_cell("\n".join(lines))
            cell.metadata["tags"] = ["injected-parameters"]
            nb.cells.insert(params[0] + 1, cell)

    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=args.timeout,
        resources={"metadata": {"path": os.path.dirname(path)}})
    failed = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        failed = exc
    install_cell = next(c for c in nb.cells if "TRACEML_SOURCE =" in c.source)
    for line in (_text(install_cell).strip() or "(no output)").split("\n"):
        print("install cell: " + line)
    ran = [c for c in nb.cells if c.cell_type == "code" and c.get("execution_count")]
    print(f"notebook: {len(ran)} code cells ran")
    if failed is not None:
        print(f"notebook: a cell failed:\n{failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

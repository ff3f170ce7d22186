"""The sync facade inside a real ipykernel (the kernel's own loop is running while cells execute)."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

CELLS = [
    "import time\nimport toh_nb as tn",
    'hub = tn.Hub(ids="sequential")\nhub',
    'res = hub.spawn("Summarise the meeting notes", label="summary")\nres',
    'kid = hub.start("You edit texts", label="editor")\nkid.wait(timeout=10)\nhub.list_agents()',
    'job = hub.spawn("Crawl the archive", label="crawler", background=True)\n'
    "time.sleep(1.0)  # long synchronous cell code: the job still progresses\njob",
    "hub.jobs()[['id', 'label', 'status', 'owner']]",
    "import asyncio\ncoro = asyncio.sleep(0)\ntry:\n    asyncio.run(coro)\nexcept RuntimeError as error:\n"
    "    coro.close()\n    print(error)",
    "print('before')\nslow = tn.Hub(tn.FunctionModel(lambda r: time.sleep(1.0) or 'slow answer'))\n"
    "slow.spawn('Take your time').text",
    "hub.close()\nhub",
]


def _plain(cell) -> str:
    texts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            texts.append(output.text.rstrip("\n"))
        elif "data" in output and "text/plain" in output.data:
            texts.append(output.data["text/plain"])
    return "\n".join(texts)


@pytest.mark.slow
def test_a_notebook_using_the_sync_hub_runs_in_a_real_kernel(tmp_path):
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no python3 kernelspec (install one with: python -m ipykernel install --sys-prefix)")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=60, store_widget_state=False,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [output for cell in notebook.cells for output in cell.outputs if output.output_type == "error"]
    assert errors == []
    outputs = [_plain(cell) for cell in notebook.cells]
    assert outputs[1] == "Hub(root=root, model=DemoModel, loop=portal, open)"
    assert outputs[2] == ("RunResult(agent=agent-1, stop_reason=completed, text='[summary] Done: \"Summarise the "
                          "meeting notes\" \u2014 handled in 4 words of input.', tokens=" + outputs[2].split("tokens=")[1])
    assert outputs[3] == "agent-2 [ready] \u2014 editor"
    assert outputs[4] == "Job(subagent-1 [completed] \u2014 crawler)"
    assert outputs[5].split("\n")[1].split() == ["subagent-1", "crawler", "completed", "root"]  # no index column
    html = [o for o in notebook.cells[5].outputs if "data" in o and "text/html" in o.data]
    assert html and "<table" in html[0].data["text/html"]
    assert outputs[6] == "asyncio.run() cannot be called from a running event loop"
    assert outputs[7] == "before\n'slow answer'"
    assert outputs[8] == "Hub(root=root, model=DemoModel, loop=portal, closed)"
    rich = [o.data for cell in notebook.cells[2:5] for o in cell.outputs if "data" in o and "text/plain" in o.data]
    assert len(rich) == 3 and all("text/html" in data for data in rich)  # RunResult, AgentListing, Job as HTML
    # a quick wait (kid.wait()) leaves no output; a long one (1 s) showed its line and left it emptied
    assert [o.output_type for o in notebook.cells[3].outputs] == ["execute_result"]
    assert [(o.output_type, sorted(o.get("data", {}))) for o in notebook.cells[7].outputs] == [
        ("stream", []), ("display_data", []), ("execute_result", ["text/plain"])]


KERNEL_MODE_CELLS = [
    "import threading\nimport toh_nb as tn\nhub = tn.Hub(ids='sequential', loop='kernel')\nhub",
    "hub.spawn('Summarise notes', label='summary').text",
    "job = hub.spawn('Crawl', label='crawler', background=True)\njob.output(wait=True, timeout=10)",
    "kid = hub.start('Edit this', label='editor')\nkid.wait(timeout=10)\nhub.list_agents()",
    "[t.name for t in threading.enumerate() if t.name.startswith('toh_nb-portal')]",
    "hub.close()\nhub",
]


@pytest.mark.slow
def test_the_explicit_kernel_loop_mode_in_a_real_kernel(tmp_path):
    """``Hub(loop="kernel")`` (nest_asyncio2 on the kernel's own loop) on this machine's ipykernel."""
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no python3 kernelspec (install one with: python -m ipykernel install --sys-prefix)")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in KERNEL_MODE_CELLS]
    nbclient.NotebookClient(notebook, kernel_name="python3", timeout=60, store_widget_state=False,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [output for cell in notebook.cells for output in cell.outputs if output.output_type == "error"]
    assert errors == []
    assert [_plain(cell) for cell in notebook.cells] == [
        "Hub(root=root, model=DemoModel, loop=kernel, open)",
        "'[summary] Done: \"Summarise notes\" \u2014 handled in 2 words of input.'",
        "'[crawler] Done: \"Crawl\" \u2014 handled in 1 word of input.'",
        "agent-3 [ready] \u2014 editor",
        "[]",  # no portal thread in this mode
        "Hub(root=root, model=DemoModel, loop=kernel, closed)",
    ]

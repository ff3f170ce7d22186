"""``tn.MCPServer``: what it accepts, the clear errors for what it refuses, how it is named and shown,
and the ACP entry it becomes; results of each content kind as the model reads them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mcp.types import (BlobResourceContents, CallToolResult, EmbeddedResource, ImageContent, ResourceLink,
                       TextContent, TextResourceContents)

import toh_nb as tn
from toh_nb.mcp import texts
from toh_nb.mcp.results import tool_result


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, texts.ONE_TRANSPORT),
    ({"command": ["x"], "url": "http://h/mcp"}, texts.ONE_TRANSPORT),
    ({"command": "npx server"}, "command must be a non-empty list of arguments (no shell), got 'npx server'"),
    ({"command": []}, "command must be a non-empty list of arguments (no shell), got []"),
    ({"command": ["x", ""]}, "command arguments must be non-empty strings, got ['x', '']"),
    ({"command": ["x"], "headers": {"a": "b"}}, texts.HEADERS_NEED_URL),
    ({"url": "ftp://h/mcp"}, "url must be an http:// or https:// URL, got 'ftp://h/mcp'"),
    ({"url": "http://h/mcp", "env": {"A": "1"}}, texts.ENV_NEEDS_COMMAND),
    ({"command": ["x"], "env": {"A": 1}}, "env must be a mapping of str to str"),
    ({"command": ["x"], "cwd": "relative/dir"}, "cwd must be an existing absolute directory, got 'relative/dir'"),
    ({"command": ["x"], "name": " "}, "name must be a non-empty string, got ' '"),
    ({"command": ["x"], "timeout": 0}, None),
])
def test_bad_settings_are_refused_naming_what_is_wrong(kwargs, message):
    with pytest.raises(tn.UsageError) as caught:
        tn.MCPServer(**kwargs)
    if message is not None:
        assert str(caught.value) == message
    else:
        assert str(caught.value).startswith("timeout must be")


def test_names_reprs_and_acp_entries_never_show_secret_values(tmp_path):
    npx = tn.MCPServer(["npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"], env={"TOKEN": "s3cret"})
    assert npx.name == "server-filesystem"
    assert repr(npx) == ("MCPServer(command=['npx', '-y', '@modelcontextprotocol/server-filesystem', '/data'], "
                         "env=<1 variables>, name='server-filesystem')")
    assert npx.display == 'MCP server "server-filesystem" (`npx -y @modelcontextprotocol/server-filesystem /data`)'
    assert npx.acp_entry() == {"name": "server-filesystem", "command": "npx",
                               "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
                               "env": [{"name": "TOKEN", "value": "s3cret"}]}
    web = tn.MCPServer(url="http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer s3cret"})
    assert web.name == "127_0_0_1_8000" and web.transport == "http"
    assert "s3cret" not in repr(web) and "s3cret" not in web.display
    assert web.acp_entry() == {"type": "http", "name": "127_0_0_1_8000", "url": "http://127.0.0.1:8000/mcp",
                               "headers": [{"name": "Authorization", "value": "Bearer s3cret"}]}
    assert tn.MCPServer([sys.executable, "servers/my.server.py"]).name == "my_server"


def test_every_content_kind_becomes_text_the_model_reads():
    result = tool_result(CallToolResult(content=[
        TextContent(type="text", text="hello"),
        ImageContent(type="image", data="QUJD", mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="file:///a.txt", mime_type="text/plain",
                                                                         text="inside")),
        EmbeddedResource(type="resource", resource=BlobResourceContents(uri="file:///b.bin", blob="AAAA")),
        ResourceLink(type="resource_link", uri="file:///c.md", name="c"),
    ]))
    assert result.text == ("hello\n[image: image/png, 4 bytes base64]\n[resource file:///a.txt (text/plain)]\ninside\n"
                           "[resource file:///b.bin: 4 bytes base64]\n[resource link file:///c.md (c)]")
    assert not result.is_error and result.value["content"][0] == {"type": "text", "text": "hello"}
    failed = tool_result(CallToolResult(content=[TextContent(type="text", text="no such file")], is_error=True))
    assert (failed.text, failed.is_error) == ("Error: no such file", True)


@pytest.mark.slow
def test_mcp_without_the_extra_prints_the_install_line_and_exits_2(tmp_path):
    hide = "import sys; sys.modules['mcp'] = None; import runpy; runpy.run_module('toh_nb', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", hide, "mcp", "--store", str(tmp_path / "store")],
                          input="", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "toh-nb mcp: error: MCP needs the optional extra: pip install 'toh-nb[mcp]' (PyPI mcp, the official SDK)\n"
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("port", ["0", "65536"])
def test_an_http_port_out_of_range_is_refused(port, capsys):
    from toh_nb.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["mcp", "--http", port])
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith("toh-nb: error: --http must be a port from 1 to 65535\n")

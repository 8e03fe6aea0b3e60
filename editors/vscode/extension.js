// Starts `svc lsp` for JSON and YAML files. The server tells manifests and ingress project
// files from other documents by their content, and leaves the others alone.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate() {
  const command = vscode.workspace.getConfiguration("svc").get("path", "svc");
  client = new LanguageClient(
    "svc",
    "svc lsp",
    // The stdio transport adds `--stdio`, which `svc lsp` accepts.
    { command, args: ["lsp"], transport: TransportKind.stdio },
    {
      documentSelector: ["json", "jsonc", "yaml"].map((language) => ({ scheme: "file", language })),
    },
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };

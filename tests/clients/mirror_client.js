#!/usr/bin/env node
// A mirror client in Node.js, written from fixture/mirror/protocol.md alone (node:fs, no
// dependencies). Usage: node mirror_client.js SRC DST
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const [src, dst] = process.argv.slice(2);
let seq = 0;
const tempName = (p) => path.join(path.dirname(p), `.${path.basename(p)}.part-${process.pid}-${seq++}`);

function lstat(p) {
  try { return fs.lstatSync(p, { bigint: true }); } catch { return null; }
}

function placeLink(s, d) {
  const target = fs.readlinkSync(s);
  const have = lstat(d);
  if (have && have.isSymbolicLink() && fs.readlinkSync(d) === target) return;
  const tmp = tempName(d);
  fs.symlinkSync(target, tmp);
  fs.renameSync(tmp, d);
}

function placeFile(s, d, st) {
  const have = lstat(d);
  if (have && have.isFile() && have.size === st.size && have.mtimeNs === st.mtimeNs) return;
  const tmp = tempName(d);
  fs.copyFileSync(s, tmp);
  fs.utimesSync(tmp, Number(st.atimeNs) / 1e9, Number(st.mtimeNs) / 1e9);
  fs.renameSync(tmp, d);
}

function copyTree(s, d) {
  for (const entry of fs.readdirSync(s, { withFileTypes: true })) {
    const from = path.join(s, entry.name), to = path.join(d, entry.name);
    const st = fs.lstatSync(from, { bigint: true });
    if (st.isSymbolicLink()) {
      const have = lstat(to);
      if (have && have.isDirectory()) fs.rmSync(to, { recursive: true });
      placeLink(from, to);
    } else if (st.isDirectory()) {
      const have = lstat(to);
      if (have && !have.isDirectory()) fs.rmSync(to);
      if (!have || !have.isDirectory()) fs.mkdirSync(to);
      copyTree(from, to);
    } else if (st.isFile()) {
      const have = lstat(to);
      if (have && have.isDirectory()) fs.rmSync(to, { recursive: true });
      placeFile(from, to, st);
    }
  }
}

function deleteExtra(s, d) {
  for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
    const from = path.join(s, entry.name), to = path.join(d, entry.name);
    const want = lstat(from);
    if (!want) {
      fs.rmSync(to, { recursive: true, force: true });
    } else if (entry.isDirectory() && want.isDirectory()) {
      deleteExtra(from, to);
    }
  }
}

try {
  copyTree(src, dst);
  deleteExtra(src, dst);
  process.stdout.write(JSON.stringify({ claim: "completed" }) + "\n");
} catch (e) {
  process.stderr.write(`mirror: ${e.message}\n`);
  process.exit(1);
}

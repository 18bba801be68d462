#!/usr/bin/env node
// An honest backup client for evlab's receiver in Node.js (v20, node: built-ins only), written
// from fixture/backup/protocol.md; the same behaviour and claims as `backup_client.py --variant honest`.
//
// Usage: node backup_client.js HOST PORT SOURCE [IGNORED...]
//
// 1. hash SOURCE with SHA-256 in one streaming read pass;
// 2. `CHECK <digest>` -> `HAVE` (done, nothing to send) or `NEED`;
// 3. on NEED, `PUT <digest> <length>` on the same connection and stream the file from byte 0,
//    then wait for `OK <digest>`. A `REJECT`, a dropped or reset connection or a timeout during
//    the upload is retried from byte 0 on a new connection, at most 3 upload attempts in all,
//    0.2 s apart.
//
// Claims go to stdout as JSON lines (started, checked, uploaded, then completed or failed); the
// exit status is 0 only when the client claims completion. It writes no file, talks only to
// HOST:PORT, and leaves no socket, file handle or timer behind, so it exits as soon as it is done.
'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs/promises');
const net = require('node:net');

const CHUNK = 64 * 1024;
const TIMEOUT_MS = 20_000;
const MAX_ATTEMPTS = 3;
const BACKOFF_MS = 200;
const MAX_LINE = 256;

class UploadError extends Error {}

function claim(name, fields = {}) {
  // stdout is synchronous for files and pipes on Linux: a claim is out before the next step.
  process.stdout.write(JSON.stringify({ claim: name, ...fields }) + '\n');
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function hashFile(path) {
  const sha = crypto.createHash('sha256');
  let length = 0;
  const fh = await fs.open(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, CHUNK, null);
      if (bytesRead === 0) break;
      sha.update(buf.subarray(0, bytesRead));
      length += bytesRead;
    }
  } finally {
    await fh.close();
  }
  return { digest: sha.digest('hex'), length };
}

// One TCP connection to the receiver with a line reader over what it sends.
class Connection {
  constructor(socket) {
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    this.ended = false;
    this.error = null;
    this.wake = null;
    socket.on('data', (data) => {
      this.buffer = this.buffer.length ? Buffer.concat([this.buffer, data]) : data;
      this.notify();
    });
    socket.on('end', () => { this.ended = true; this.notify(); });
    socket.on('close', () => { this.ended = true; this.notify(); });
    socket.on('error', (e) => { this.error = this.error || e; this.notify(); });
    socket.on('timeout', () => {
      this.error = this.error || new Error(`timed out after ${TIMEOUT_MS / 1000} s`);
      socket.destroy();
      this.notify();
    });
  }

  static open(host, port) {
    return new Promise((resolve, reject) => {
      // allowHalfOpen: a receiver that rejects a PUT answers `REJECT`, half-closes and drains
      // what is still sent; keep sending (as the Python client does), then read the answer.
      const socket = net.createConnection({ host, port, allowHalfOpen: true });
      socket.setTimeout(TIMEOUT_MS);
      const onError = (e) => { socket.destroy(); reject(e); };
      const onTimeout = () => { onError(new Error(`timed out after ${TIMEOUT_MS / 1000} s`)); };
      socket.once('error', onError);
      socket.once('timeout', onTimeout);
      socket.once('connect', () => {
        socket.off('error', onError);
        socket.off('timeout', onTimeout);
        resolve(new Connection(socket));
      });
    });
  }

  notify() {
    const wake = this.wake;
    this.wake = null;
    if (wake) wake();
  }

  // Resolves once the bytes are handed to the kernel; rejects if the connection fails.
  write(data) {
    return new Promise((resolve, reject) => {
      if (this.error) { reject(this.error); return; }
      if (this.socket.destroyed || this.socket.writableEnded) {
        reject(new Error('connection closed'));
        return;
      }
      this.socket.write(data, (e) => (e ? reject(this.error || e) : resolve()));
    });
  }

  // One answer line without its `\n`; UploadError if the connection ends first.
  async readLine() {
    for (;;) {
      const nl = this.buffer.indexOf(0x0a);
      if (nl >= 0) {
        if (nl + 1 > MAX_LINE) throw new UploadError('answer line too long');
        const line = this.buffer.subarray(0, nl).toString('latin1');
        this.buffer = this.buffer.subarray(nl + 1);
        return line;
      }
      if (this.buffer.length >= MAX_LINE) throw new UploadError('answer line too long');
      if (this.error) throw new UploadError(`connection error: ${this.error.message}`);
      if (this.ended) throw new UploadError('connection closed before a full answer');
      await new Promise((resolve) => { this.wake = resolve; });
    }
  }

  // A complete answer line already received, or null (used when a send fails mid-upload).
  bufferedLine() {
    const nl = this.buffer.indexOf(0x0a);
    return nl >= 0 && nl + 1 <= MAX_LINE ? this.buffer.subarray(0, nl).toString('latin1') : null;
  }

  close() {
    this.socket.destroy();
  }
}

// Send one PUT, streaming path from byte 0; throw UploadError unless `OK <digest>`.
async function put(conn, path, digest, length) {
  let answer;
  try {
    await conn.write(`PUT ${digest} ${length}\n`);
    const fh = await fs.open(path, 'r');
    try {
      let sent = 0;
      while (sent < length) {
        const buf = Buffer.allocUnsafe(Math.min(CHUNK, length - sent));
        const { bytesRead } = await fh.read(buf, 0, buf.length, null);
        if (bytesRead === 0) {
          throw new UploadError(`source shrank to ${sent} bytes during the upload`);
        }
        await conn.write(buf.subarray(0, bytesRead));
        sent += bytesRead;
      }
    } finally {
      await fh.close();
    }
    answer = await conn.readLine();
  } catch (e) {
    if (e instanceof UploadError) throw e;
    answer = conn.bufferedLine(); // the receiver may have answered (REJECT) before the reset
    if (answer === null) throw new UploadError(`connection error during upload: ${e.message}`);
  }
  if (answer.toLowerCase() !== `ok ${digest}`.toLowerCase()) {
    throw new UploadError(answer.startsWith('REJECT ') ? answer.slice('REJECT '.length)
      : `unexpected answer ${JSON.stringify(answer)}`);
  }
}

// CHECK, then PUT with retries. Returns { has, attempts, reason } (reason null on success).
async function backup(host, port, path, digest, length) {
  let conn;
  try {
    conn = await Connection.open(host, port);
  } catch (e) {
    return { has: null, attempts: 0, reason: `cannot connect: ${e.message}` };
  }
  try {
    let answer;
    try {
      await conn.write(`CHECK ${digest}\n`);
      answer = await conn.readLine();
    } catch (e) {
      return { has: null, attempts: 0, reason: `check failed: ${e.message}` };
    }
    if (answer !== 'HAVE' && answer !== 'NEED') {
      return { has: null, attempts: 0, reason: `unexpected answer to CHECK: ${JSON.stringify(answer)}` };
    }
    claim('checked', { receiver_has: answer === 'HAVE', digest });
    if (answer === 'HAVE') return { has: true, attempts: 0, reason: null };
    let reason = null;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      if (attempt > 1) { // a retry: start over on a new connection
        if (conn) conn.close();
        conn = null;
        await sleep(BACKOFF_MS);
        try {
          conn = await Connection.open(host, port);
        } catch (e) {
          reason = `cannot connect: ${e.message}`;
          continue;
        }
      }
      try {
        await put(conn, path, digest, length);
        return { has: false, attempts: attempt, reason: null };
      } catch (e) {
        reason = e.message;
      }
    }
    return { has: false, attempts: MAX_ATTEMPTS,
      reason: `upload failed after ${MAX_ATTEMPTS} attempts: ${reason}` };
  } finally {
    if (conn) conn.close();
  }
}

async function main(argv) {
  if (argv.length < 3 || !/^[0-9]+$/.test(argv[1]) || Number(argv[1]) > 65535) {
    process.stderr.write('usage: node backup_client.js HOST PORT SOURCE [IGNORED...]\n');
    return 2;
  }
  const [host, portText, source] = argv;
  const port = Number(portText);
  claim('started', { source, variant: 'honest' });
  let digest, length;
  try {
    ({ digest, length } = await hashFile(source));
  } catch (e) {
    claim('failed', { reason: `cannot read source: ${e.message}` });
    return 1;
  }
  const { has, attempts, reason } = await backup(host, port, source, digest, length);
  if (has === false && reason === null) claim('uploaded', { bytes: length, attempts });
  if (reason === null) {
    claim('completed');
    return 0;
  }
  claim('failed', { reason });
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (e) => {
    claim('failed', { reason: `internal error: ${e && e.message}` });
    process.exitCode = 1;
  },
);

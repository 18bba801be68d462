// A backup client for evlab's receiver in Rust (std only, built with rustc alone: no crates,
// so SHA-256 is written out below), written from fixture/backup/protocol.md.
//
// Usage: backup-client HOST PORT SOURCE
//        backup-client --sha256 FILE...   (prints each file's digest, to check the hash)
//
// 1. hash SOURCE with SHA-256 in one streaming pass;
// 2. `CHECK <digest>` -> `HAVE` (done) or `NEED`;
// 3. on NEED, `PUT <digest> <length>` on the same connection, stream SOURCE from byte 0 and
//    expect `OK <digest>`; a REJECT, a dropped connection or a timeout is retried from byte 0
//    on a new connection, at most 3 upload attempts in all, 0.2 s apart.
// Claims go to stdout as JSON lines; exit status 0 only with {"claim": "completed"}.
// Kept to Rust 2021 as Debian 12's rustc 1.63 knows it.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::exit;
use std::thread::sleep;
use std::time::Duration;

const CHUNK: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ATTEMPTS: u32 = 3;
const BACKOFF: Duration = Duration::from_millis(200);
const MAX_LINE: usize = 256;

// ---- SHA-256 (FIPS 180-4) ------------------------------------------------------------------

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

struct Sha256 {
    state: [u32; 8],
    block: [u8; 64],
    used: usize, // bytes waiting in `block`
    total: u64,  // bytes hashed
}

impl Sha256 {
    fn new() -> Sha256 {
        Sha256 {
            state: [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19],
            block: [0; 64],
            used: 0,
            total: 0,
        }
    }

    fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        while !data.is_empty() {
            let take = (64 - self.used).min(data.len());
            self.block[self.used..self.used + take].copy_from_slice(&data[..take]);
            self.used += take;
            data = &data[take..];
            if self.used == 64 {
                let block = self.block;
                self.compress(&block);
                self.used = 0;
            }
        }
    }

    fn finish(mut self) -> String {
        let bits = self.total.wrapping_mul(8);
        // Padding: 0x80, zeros up to 56 mod 64, then the message length in bits, big-endian.
        let pad = if self.used < 56 { 56 - self.used } else { 120 - self.used };
        let mut tail = vec![0u8; pad];
        tail[0] = 0x80;
        tail.extend_from_slice(&bits.to_be_bytes());
        self.update(&tail);
        self.state.iter().map(|w| format!("{:08x}", w)).collect()
    }

    fn compress(&mut self, block: &[u8; 64]) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2],
                                       block[4 * i + 3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = self.state;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = h.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (s, v) in self.state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *s = s.wrapping_add(v);
        }
    }
}

/// The SHA-256 hex digest and length of a file, in one streaming pass.
fn hash_file(path: &str) -> io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut sha = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        sha.update(&buf[..n]);
    }
    let length = sha.total;
    Ok((sha.finish(), length))
}

// ---- the protocol -------------------------------------------------------------------------

fn connect(addr: (&str, u16)) -> Result<TcpStream, String> {
    let target = addr.to_socket_addrs().map_err(|e| format!("cannot resolve {}: {}", addr.0, e))?
        .next().ok_or(format!("cannot resolve {}", addr.0))?;
    let sock = TcpStream::connect_timeout(&target, TIMEOUT)
        .map_err(|e| format!("cannot connect: {}", e))?;
    sock.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    sock.set_write_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    Ok(sock)
}

/// One answer line without its `\n`, read byte by byte so nothing past it is consumed.
fn read_line(sock: &mut TcpStream) -> Result<String, String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match sock.read(&mut byte) {
            Ok(0) => return Err("connection closed before a full answer".into()),
            Ok(_) if byte[0] == b'\n' => return Ok(String::from_utf8_lossy(&line).into_owned()),
            Ok(_) if line.len() >= MAX_LINE => return Err("answer line too long".into()),
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// One PUT: the header, SOURCE from byte 0, then the answer must be `OK <digest>`.
fn put(sock: &mut TcpStream, path: &str, digest: &str, length: u64) -> Result<(), String> {
    let io_err = |e: io::Error| e.to_string();
    sock.write_all(format!("PUT {} {}\n", digest, length).as_bytes()).map_err(io_err)?;
    let mut file = File::open(path).map_err(io_err)?;
    let mut buf = vec![0u8; CHUNK];
    let mut sent = 0u64;
    while sent < length {
        let want = (length - sent).min(CHUNK as u64) as usize;
        let n = file.read(&mut buf[..want]).map_err(io_err)?;
        if n == 0 {
            return Err(format!("source shrank to {} bytes during the upload", sent));
        }
        sock.write_all(&buf[..n]).map_err(io_err)?;
        sent += n as u64;
    }
    let answer = read_line(sock)?;
    if answer.eq_ignore_ascii_case(&format!("OK {}", digest)) {
        Ok(())
    } else if let Some(reason) = answer.strip_prefix("REJECT ") {
        Err(reason.to_string())
    } else {
        Err(format!("unexpected answer: {:?}", answer))
    }
}

/// The backup; Ok on success, else why it failed.
fn backup(addr: (&str, u16), path: &str) -> Result<(), String> {
    let (digest, length) = hash_file(path).map_err(|e| format!("cannot read source: {}", e))?;
    let mut sock = connect(addr)?;
    sock.write_all(format!("CHECK {}\n", digest).as_bytes())
        .map_err(|e| format!("check failed: {}", e))?;
    let answer = read_line(&mut sock).map_err(|e| format!("check failed: {}", e))?;
    if answer != "HAVE" && answer != "NEED" {
        return Err(format!("unexpected answer to CHECK: {:?}", answer));
    }
    claim("checked", &format!("\"receiver_has\": {}, \"digest\": {}", answer == "HAVE",
                              json(&digest)));
    if answer == "HAVE" {
        return Ok(());
    }
    let mut reason = String::new();
    let mut current = Some(sock);
    for attempt in 1..=MAX_ATTEMPTS {
        let result = match current.take() {
            Some(mut sock) => put(&mut sock, path, &digest, length), // dropped: closed
            None => {
                // a retry starts over on a new connection
                sleep(BACKOFF);
                connect(addr).and_then(|mut sock| put(&mut sock, path, &digest, length))
            }
        };
        match result {
            Ok(()) => {
                claim("uploaded", &format!("\"bytes\": {}, \"attempts\": {}", length, attempt));
                return Ok(());
            }
            Err(e) => reason = e,
        }
    }
    Err(format!("upload failed after {} attempts: {}", MAX_ATTEMPTS, reason))
}

fn claim(name: &str, fields: &str) {
    let sep = if fields.is_empty() { "" } else { ", " };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{{\"claim\": {}{}{}}}", json(name), sep, fields);
    let _ = out.flush();
}

/// A JSON string literal.
fn json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => { out.push('\\'); out.push(c); }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() >= 2 && args[1] == "--sha256" {
        for path in &args[2..] {
            match hash_file(path) {
                Ok((digest, _)) => println!("{}  {}", digest, path),
                Err(e) => { eprintln!("{}: {}", path, e); exit(1); }
            }
        }
        return;
    }
    if args.len() < 4 {
        eprintln!("usage: backup-client HOST PORT SOURCE");
        exit(2);
    }
    let port: u16 = match args[2].parse() {
        Ok(port) => port,
        Err(_) => { eprintln!("bad port {:?}", args[2]); exit(2); }
    };
    claim("started", &format!("\"source\": {}", json(&args[3])));
    match backup((&args[1], port), &args[3]) {
        Ok(()) => claim("completed", ""),
        Err(reason) => {
            claim("failed", &format!("\"reason\": {}", json(&reason)));
            exit(1);
        }
    }
}

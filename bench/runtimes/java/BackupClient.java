// A backup client for evlab's receiver in Java 17 (java.base only), written from
// fixture/backup/protocol.md.
//
// Usage: java -jar backup-client.jar HOST PORT SOURCE
//
// 1. hash SOURCE with SHA-256 in one streaming pass;
// 2. `CHECK <digest>` -> `HAVE` (done) or `NEED`;
// 3. on NEED, `PUT <digest> <length>` on the same connection, stream SOURCE from byte 0 and
//    expect `OK <digest>`; a REJECT, a dropped connection or a timeout is retried from byte 0
//    on a new connection, at most 3 upload attempts in all, 0.2 s apart.
// Claims go to stdout as JSON lines; exit status 0 only with {"claim": "completed"}.
//
// Sockets are the JVM's defaults on purpose: an IPv6 dual-stack socket, so 127.0.0.1 is
// connected as ::ffff:127.0.0.1 (java.net.preferIPv4Stack is deliberately not set).

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

public final class BackupClient {
    static final int CHUNK = 64 * 1024;
    // Hashing reads 8 KiB at a time: until the JIT has compiled SHA-256, the interpreter takes
    // ~40 ms per 64 KiB (seen when the compiler thread waits for a CPU), and the protocol asks
    // for no stretch over ~10 ms on the CPU without I/O. Interpreted, 8 KiB is ~5 ms.
    static final int HASH_CHUNK = 8 * 1024;
    static final int TIMEOUT_MS = 10_000;
    static final int MAX_ATTEMPTS = 3;
    static final long BACKOFF_MS = 200;
    static final int MAX_LINE = 256;

    /** One CHECK or upload attempt failed; the message is the reason. */
    static final class ProtocolError extends Exception {
        ProtocolError(String reason) { super(reason); }
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: BackupClient HOST PORT SOURCE");
            System.exit(2);
        }
        String host = args[0], source = args[2];
        int port = Integer.parseInt(args[1]);
        claim("started", "\"source\": " + json(source));
        String reason = run(host, port, source);
        if (reason == null) {
            claim("completed", null);
        } else {
            claim("failed", "\"reason\": " + json(reason));
        }
        System.out.flush();
        System.exit(reason == null ? 0 : 1);
    }

    /** The backup; null on success, else why it failed. */
    static String run(String host, int port, String source) {
        String digest;
        long length;
        try (InputStream in = new FileInputStream(source)) {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[HASH_CHUNK];
            length = 0;
            for (int n; (n = in.read(buf)) > 0; length += n) {
                sha.update(buf, 0, n);
            }
            digest = HexFormat.of().formatHex(sha.digest());
        } catch (IOException | NoSuchAlgorithmException e) {
            return "cannot read source: " + e.getMessage();
        }

        Socket sock;
        try {
            sock = connect(host, port);
        } catch (IOException e) {
            return "cannot connect: " + e.getMessage();
        }
        try {
            send(sock, "CHECK " + digest + "\n");
            String answer = readLine(sock);
            if (!answer.equals("HAVE") && !answer.equals("NEED")) {
                sock.close();
                return "unexpected answer to CHECK: " + answer;
            }
            boolean has = answer.equals("HAVE");
            claim("checked", "\"receiver_has\": " + has + ", \"digest\": " + json(digest));
            if (has) {
                sock.close();
                return null;
            }
        } catch (IOException | ProtocolError e) {
            closeQuietly(sock);
            return "check failed: " + e.getMessage();
        }

        String reason = null;
        for (int attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
            try {
                if (attempt > 1) {  // a retry starts over on a new connection
                    sleep(BACKOFF_MS);
                    sock = connect(host, port);
                }
                put(sock, source, digest, length);
                claim("uploaded", "\"bytes\": " + length + ", \"attempts\": " + attempt);
                return null;
            } catch (IOException | ProtocolError e) {
                reason = e.getMessage();
            } finally {
                closeQuietly(sock);
            }
        }
        return "upload failed after " + MAX_ATTEMPTS + " attempts: " + reason;
    }

    /** One PUT: the header, SOURCE from byte 0, then the answer must be `OK <digest>`. */
    static void put(Socket sock, String source, String digest, long length)
            throws IOException, ProtocolError {
        OutputStream out = sock.getOutputStream();
        out.write(("PUT " + digest + " " + length + "\n").getBytes(StandardCharsets.US_ASCII));
        try (InputStream in = new FileInputStream(source)) {
            byte[] buf = new byte[CHUNK];
            long sent = 0;
            while (sent < length) {
                int n = in.read(buf, 0, (int) Math.min(CHUNK, length - sent));
                if (n <= 0) {
                    throw new ProtocolError("source shrank to " + sent + " bytes during the upload");
                }
                out.write(buf, 0, n);
                sent += n;
            }
        }
        out.flush();
        String answer = readLine(sock);
        if (!answer.equalsIgnoreCase("OK " + digest)) {
            throw new ProtocolError(answer.startsWith("REJECT ") ? answer.substring(7)
                                    : "unexpected answer: " + answer);
        }
    }

    static Socket connect(String host, int port) throws IOException {
        Socket sock = new Socket();  // the JVM's default family: IPv6 dual-stack
        try {
            sock.connect(new InetSocketAddress(host, port), TIMEOUT_MS);
            sock.setSoTimeout(TIMEOUT_MS);
        } catch (IOException e) {
            sock.close();
            throw e;
        }
        return sock;
    }

    static void send(Socket sock, String line) throws IOException {
        OutputStream out = sock.getOutputStream();
        out.write(line.getBytes(StandardCharsets.US_ASCII));
        out.flush();
    }

    /** One answer line without its `\n`, read byte by byte so nothing past it is consumed. */
    static String readLine(Socket sock) throws IOException, ProtocolError {
        InputStream in = sock.getInputStream();
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        for (int b; (b = in.read()) != '\n'; line.write(b)) {
            if (b < 0) {
                throw new ProtocolError("connection closed before a full answer");
            }
            if (line.size() >= MAX_LINE) {
                throw new ProtocolError("answer line too long");
            }
        }
        return line.toString(StandardCharsets.US_ASCII);
    }

    static void claim(String name, String fields) {
        System.out.println("{\"claim\": " + json(name) + (fields == null ? "" : ", " + fields) + "}");
        System.out.flush();
    }

    /** A JSON string literal. */
    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static void closeQuietly(Socket sock) {
        try {
            sock.close();
        } catch (IOException e) {
            // closing is best effort: the outcome is already decided
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}

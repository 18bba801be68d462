// A fetch client written from fixture/fetch/protocol.md alone, in Java on a plain socket (one
// request per connection, nothing retried behind its back): what a user of evlab would hand it.
// Compiled into a class-path folder and run as `java -cp DIR Fetch URL OUT`.

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Map;

public class Fetch {
    static final int MAX_REQUESTS = 3;

    /** A response's status and headers (names in lower case); its body is still in `body`. */
    static final class Response {
        int status;
        final Map<String, String> headers = new HashMap<>();
        InputStream body;

        long number(String name, long otherwise) {
            try {
                return Long.parseLong(headers.getOrDefault(name, "").trim());
            } catch (NumberFormatException e) {
                return otherwise;
            }
        }
    }

    static String read(Path path) {
        try {
            return Files.readString(path).trim();
        } catch (IOException e) {
            return "";
        }
    }

    static void put(Path path, String text) throws IOException {
        Path fresh = Path.of(path + ".new");
        Files.writeString(fresh, text);
        Files.move(fresh, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    static String line(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1 && c != '\n') {
            if (c != '\r') buf.write(c);
        }
        if (c == -1 && buf.size() == 0) throw new IOException("connection closed before a response");
        return buf.toString(StandardCharsets.ISO_8859_1);
    }

    static Response request(Socket sock, URI url, Map<String, String> extra) throws IOException {
        int port = url.getPort() == -1 ? 80 : url.getPort();
        StringBuilder req = new StringBuilder();
        req.append("GET ").append(url.getRawPath().isEmpty() ? "/" : url.getRawPath())
           .append(" HTTP/1.1\r\nHost: ").append(url.getHost()).append(':').append(port)
           .append("\r\nConnection: close\r\n");
        for (Map.Entry<String, String> h : extra.entrySet()) {
            req.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n");
        }
        req.append("\r\n");
        OutputStream out = sock.getOutputStream();
        out.write(req.toString().getBytes(StandardCharsets.ISO_8859_1));
        out.flush();
        InputStream in = new BufferedInputStream(sock.getInputStream());
        Response r = new Response();
        String[] statusLine = line(in).split(" ");
        r.status = Integer.parseInt(statusLine[1]);
        for (String h = line(in); !h.isEmpty(); h = line(in)) {
            int colon = h.indexOf(':');
            if (colon > 0) r.headers.put(h.substring(0, colon).trim().toLowerCase(), h.substring(colon + 1).trim());
        }
        r.body = in;
        return r;
    }

    static boolean fetch(URI url, Path out) throws InterruptedException {
        Path part = Path.of(out + ".part"), partTag = Path.of(out + ".part.etag"), tag = Path.of(out + ".etag");
        for (int i = 0; i < MAX_REQUESTS; i++) {
            Map<String, String> headers = new HashMap<>();
            if (Files.exists(out) && !read(tag).isEmpty()) headers.put("If-None-Match", read(tag));
            long held = 0;
            try {
                held = Files.exists(part) ? Files.size(part) : 0;
            } catch (IOException e) {
                held = 0;
            }
            if (held > 0 && !read(partTag).isEmpty()) {
                headers.put("Range", "bytes=" + held + "-");
                headers.put("If-Range", read(partTag));
            }
            try (Socket sock = new Socket(url.getHost(), url.getPort() == -1 ? 80 : url.getPort())) {
                sock.setSoTimeout(30_000);
                Response r = request(sock, url, headers);
                if (r.status == 304) return true;
                if (r.status == 503) {
                    Thread.sleep(1000 * r.number("retry-after", 1));
                    continue;
                }
                if (r.status != 200 && r.status != 206) {
                    System.err.println("HTTP " + r.status);
                    return false;
                }
                long total;
                if (r.status == 200) {
                    put(partTag, r.headers.getOrDefault("etag", ""));
                    total = r.number("content-length", -1);
                } else {
                    String range = r.headers.getOrDefault("content-range", "/-1");
                    total = Long.parseLong(range.substring(range.lastIndexOf('/') + 1).trim());
                }
                long length = r.number("content-length", Long.MAX_VALUE);
                StandardOpenOption mode = r.status == 200 ? StandardOpenOption.TRUNCATE_EXISTING : StandardOpenOption.APPEND;
                try (OutputStream file = Files.newOutputStream(part, StandardOpenOption.CREATE, StandardOpenOption.WRITE, mode)) {
                    byte[] chunk = new byte[1 << 16];
                    for (long got = 0; got < length; ) {
                        int n = r.body.read(chunk, 0, (int) Math.min(chunk.length, length - got));
                        if (n < 0) break;
                        file.write(chunk, 0, n);
                        got += n;
                    }
                } catch (IOException e) {   // reset mid-body: keep what arrived, ask for the rest
                    System.err.println(e);
                    continue;
                }
                if (Files.size(part) != total) continue;
                Files.move(part, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                put(tag, read(partTag));
                Files.delete(partTag);
                return true;
            } catch (IOException | RuntimeException e) {
                System.err.println(e);
            }
        }
        return false;
    }

    public static void main(String[] args) throws Exception {
        if (fetch(new URI(args[0]), Path.of(args[1]))) {
            System.out.println("{\"claim\": \"completed\"}");
            System.exit(0);
        }
        System.exit(1);
    }
}

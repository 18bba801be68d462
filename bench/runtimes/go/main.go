// A backup client for evlab's receiver in Go (standard library only), written from
// fixture/backup/protocol.md.
//
// Usage: backup-client HOST PORT SOURCE
//
//  1. hash SOURCE with SHA-256 in one streaming pass;
//  2. `CHECK <digest>` -> `HAVE` (done) or `NEED`;
//  3. on NEED, `PUT <digest> <length>` on the same connection, stream SOURCE from byte 0 and
//     expect `OK <digest>`; a REJECT, a dropped connection or a timeout is retried from byte 0
//     on a new connection, at most 3 upload attempts in all, 0.2 s apart.
//
// Claims go to stdout as JSON lines; exit status 0 only with {"claim": "completed"}.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

const (
	chunk       = 64 * 1024
	timeout     = 10 * time.Second
	maxAttempts = 3
	backoff     = 200 * time.Millisecond
	maxLine     = 256
)

// claim prints one JSON-line claim; fields alternate name, value.
func claim(name string, fields ...interface{}) {
	m := map[string]interface{}{"claim": name}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fields[i].(string)] = fields[i+1]
	}
	line, _ := json.Marshal(m)
	os.Stdout.Write(append(line, '\n'))
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	sha := sha256.New()
	n, err := io.CopyBuffer(sha, f, make([]byte, chunk))
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(sha.Sum(nil)), n, nil
}

// conn is one connection to the receiver with a reader for its answer lines.
type conn struct {
	c net.Conn
	r *bufio.Reader
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &conn{c, bufio.NewReaderSize(c, maxLine)}, nil
}

// readLine returns one answer line without its "\n".
func (c *conn) readLine() (string, error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	line, err := c.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errors.New("answer line too long")
	}
	if err == io.EOF {
		return "", errors.New("connection closed before a full answer")
	}
	if err != nil {
		return "", err
	}
	return string(line[:len(line)-1]), nil
}

func (c *conn) send(data []byte) error {
	c.c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.c.Write(data)
	return err
}

// put sends one PUT: the header, SOURCE from byte 0, then expects `OK <digest>`.
func (c *conn) put(path, digest string, length int64) error {
	if err := c.send([]byte(fmt.Sprintf("PUT %s %d\n", digest, length))); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, chunk)
	for sent := int64(0); sent < length; {
		want := int64(chunk)
		if length-sent < want {
			want = length - sent
		}
		n, err := f.Read(buf[:want])
		if n == 0 {
			return fmt.Errorf("source shrank to %d bytes during the upload (%v)", sent, err)
		}
		if err := c.send(buf[:n]); err != nil {
			return err
		}
		sent += int64(n)
	}
	answer, err := c.readLine()
	if err != nil {
		return err
	}
	if !strings.EqualFold(answer, "OK "+digest) {
		if strings.HasPrefix(answer, "REJECT ") {
			return errors.New(strings.TrimPrefix(answer, "REJECT "))
		}
		return fmt.Errorf("unexpected answer: %q", answer)
	}
	return nil
}

// backup runs the protocol; nil on success, else why it failed.
func backup(addr, path string) error {
	digest, length, err := hashFile(path)
	if err != nil {
		return fmt.Errorf("cannot read source: %v", err)
	}
	c, err := dial(addr)
	if err != nil {
		return fmt.Errorf("cannot connect: %v", err)
	}
	answer := ""
	if err = c.send([]byte("CHECK " + digest + "\n")); err == nil {
		answer, err = c.readLine()
	}
	if err != nil {
		c.c.Close()
		return fmt.Errorf("check failed: %v", err)
	}
	if answer != "HAVE" && answer != "NEED" {
		c.c.Close()
		return fmt.Errorf("unexpected answer to CHECK: %q", answer)
	}
	claim("checked", "receiver_has", answer == "HAVE", "digest", digest)
	if answer == "HAVE" {
		return c.c.Close()
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 { // a retry starts over on a new connection
			time.Sleep(backoff)
			if c, err = dial(addr); err != nil {
				err = fmt.Errorf("cannot connect: %v", err)
				continue
			}
		}
		err = c.put(path, digest, length)
		c.c.Close()
		if err == nil {
			claim("uploaded", "bytes", length, "attempts", attempt)
			return nil
		}
	}
	return fmt.Errorf("upload failed after %d attempts: %v", maxAttempts, err)
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: backup-client HOST PORT SOURCE")
		os.Exit(2)
	}
	claim("started", "source", os.Args[3])
	if err := backup(net.JoinHostPort(os.Args[1], os.Args[2]), os.Args[3]); err != nil {
		claim("failed", "reason", err.Error())
		os.Exit(1)
	}
	claim("completed")
}

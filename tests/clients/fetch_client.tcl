# A fetch client written from fixture/fetch/protocol.md alone, in Tcl 8.6 with nothing but the
# core `socket` command and HTTP/1.1 by hand.
#
#     tclsh fetch_client.tcl URL OUT
#
# OUT.part holds bytes as they arrive and is renamed to OUT once whole; OUT.etag is the ETag of
# the content in OUT (sent as If-None-Match); OUT.part.etag is the ETag of the bytes in OUT.part
# (a resume sends Range: bytes=N- with If-Range: that ETag). A 503's Retry-After is slept out.
# At most 3 requests per run. Exit 0 with {"claim": "completed"} only when OUT is current.

set MAX_REQUESTS 3
set IO_TIMEOUT_MS 30000

proc fail {msg} {
    puts stderr "fetch: $msg"
    exit 1
}

proc read_file {path} {
    set f [open $path r]
    fconfigure $f -translation binary
    set data [read $f]
    close $f
    return [string trim $data]
}

# Write a small file whole or not at all: a temporary name in the same folder, then a rename.
proc write_atomically {path data} {
    set tmp "$path.tmp"
    set f [open $tmp w]
    fconfigure $f -translation binary
    puts -nonewline $f $data
    close $f
    file rename -force $tmp $path
}

proc parse_url {url} {
    if {![regexp -nocase {^http://([^/:?#]+|\[[^\]]+\])(?::([0-9]+))?([^#]*)} $url -> host port path]} {
        fail "not an http:// URL: $url"
    }
    if {$port eq ""} { set port 80 }
    if {$path eq ""} { set path / }
    if {[string index $path 0] eq "?"} { set path /$path }
    set hostport $host
    if {$port != 80} { append hostport :$port }
    set host [string trim $host {[]}]
    return [list $host $port $path $hostport]
}

# Blocking reads with a deadline: the socket is non-blocking and we wait for it with vwait, so
# a stalled peer ends the request instead of hanging the run.
proc wait_readable {sock} {
    global IO_TIMEOUT_MS ready
    set ready($sock) ""
    fileevent $sock readable [list set ::ready($sock) readable]
    set timer [after $IO_TIMEOUT_MS [list set ::ready($sock) timeout]]
    vwait ::ready($sock)
    after cancel $timer
    fileevent $sock readable {}
    if {$ready($sock) eq "timeout"} { error "timed out waiting for the server" }
}

proc get_line {sock} {
    while 1 {
        set n [gets $sock line]
        if {$n >= 0} { return [string trimright $line "\r"] }
        if {[eof $sock]} { error "connection closed in the headers" }
        wait_readable $sock
    }
}

# Up to $want bytes into $fh; returns how many came before the body ended or broke.
proc copy_body {sock fh want} {
    set got 0
    while {$got < $want} {
        if {[catch {set chunk [read $sock [expr {min(65536, $want - $got)}]]}]} { break }
        if {[string length $chunk] > 0} {
            puts -nonewline $fh $chunk
            incr got [string length $chunk]
            continue
        }
        if {[eof $sock]} { break }
        if {[catch {wait_readable $sock}]} { break }
    }
    flush $fh
    return $got
}

# One request; returns a dict: status, headers (lower-case names), sock (open, body unread).
proc request {host port path hostport extra} {
    set sock [socket $host $port]
    fconfigure $sock -translation binary -buffering full -blocking 0
    set req "GET $path HTTP/1.1\r\nHost: $hostport\r\nUser-Agent: evlab-fetch-tcl/1\r\n"
    append req "Accept-Encoding: identity\r\nConnection: close\r\n"
    foreach {name value} $extra { append req "$name: $value\r\n" }
    append req "\r\n"
    puts -nonewline $sock $req
    flush $sock
    set status_line [get_line $sock]
    if {![regexp {^HTTP/1\.[01] ([0-9]{3})} $status_line -> status]} {
        close $sock
        error "bad status line: $status_line"
    }
    set headers [dict create]
    while {[set line [get_line $sock]] ne ""} {
        if {[regexp {^([^:]+):[ \t]*(.*?)[ \t]*$} $line -> name value]} {
            dict set headers [string tolower $name] $value
        }
    }
    return [dict create status $status headers $headers sock $sock]
}

proc header {resp name {default ""}} {
    set h [dict get $resp headers]
    if {[dict exists $h $name]} { return [dict get $h $name] }
    return $default
}

proc retry_after_seconds {value} {
    if {[string is integer -strict $value]} { return [expr {max(0, $value)}] }
    if {![catch {clock scan $value -format {%a, %d %b %Y %H:%M:%S GMT} -gmt 1} when]} {
        return [expr {max(0, $when - [clock seconds])}]
    }
    return 1
}

proc finish {out etag} {
    # OUT.etag must never describe content that is not in OUT: drop the old one first, then
    # put the whole file in place, then record its ETag.
    file delete -force "$out.etag"
    file rename -force "$out.part" $out
    if {$etag ne ""} { write_atomically "$out.etag" $etag }
    file delete -force "$out.part.etag"
    puts {{"claim": "completed"}}
    exit 0
}

proc main {argv} {
    global MAX_REQUESTS
    if {[llength $argv] != 2} { fail "usage: tclsh fetch_client.tcl URL OUT" }
    lassign $argv url out
    lassign [parse_url $url] host port path hostport
    set part "$out.part"
    set part_etag_file "$out.part.etag"

    # A partial file whose version we do not know cannot be resumed safely.
    if {[file exists $part] && (![file exists $part_etag_file]
            || [read_file $part_etag_file] eq "" || [file size $part] == 0)} {
        file delete -force $part $part_etag_file
    }
    if {![file exists $part]} { file delete -force $part_etag_file }

    set last_error "no request made"
    for {set n 1} {$n <= $MAX_REQUESTS} {incr n} {
        set extra {}
        if {[file exists $part]} {
            lappend extra Range "bytes=[file size $part]-" If-Range [read_file $part_etag_file]
        } elseif {[file exists $out] && [file exists "$out.etag"]
                  && [set etag [read_file "$out.etag"]] ne ""} {
            lappend extra If-None-Match $etag
        }
        if {[catch {request $host $port $path $hostport $extra} resp]} {
            set last_error $resp
            continue
        }
        set sock [dict get $resp sock]
        set status [dict get $resp status]
        switch -- $status {
            304 {
                close $sock
                if {[file exists $out]} {
                    puts {{"claim": "completed"}}
                    exit 0
                }
                fail "304 Not Modified without a file to keep"
            }
            503 {
                catch {close $sock}
                set last_error "503 Service Unavailable"
                if {$n < $MAX_REQUESTS} {
                    set wait [retry_after_seconds [header $resp retry-after 1]]
                    after [expr {$wait * 1000}]
                }
                continue
            }
            200 {
                set length [header $resp content-length]
                if {![string is wide -strict $length]} {
                    close $sock
                    fail "200 without a Content-Length"
                }
                set etag [header $resp etag]
                # the whole file anew: whatever partial we held is replaced
                file delete -force $part_etag_file
                set fh [open $part w]
                if {$etag ne ""} { write_atomically $part_etag_file $etag }
                set total $length
                set start 0
            }
            206 {
                set etag [expr {[file exists $part_etag_file] ? [read_file $part_etag_file] : ""}]
                set sent_etag [header $resp etag $etag]
                if {![file exists $part] || $etag eq "" || $sent_etag ne $etag
                        || ![regexp {^bytes ([0-9]+)-([0-9]+)/([0-9]+)$} \
                                [header $resp content-range] -> start end total]
                        || $start != [file size $part]} {
                    close $sock
                    file delete -force $part $part_etag_file
                    set last_error "206 with an unusable Content-Range"
                    continue
                }
                set fh [open $part a]
            }
            default {
                close $sock
                fail "HTTP $status"
            }
        }
        fconfigure $fh -translation binary
        set want [expr {$total - $start}]
        set got [copy_body $sock $fh $want]
        close $fh
        catch {close $sock}
        if {$got == $want && [file size $part] == $total} {
            if {$etag eq "" && [file exists $part_etag_file]} { set etag [read_file $part_etag_file] }
            finish $out $etag
        }
        if {$etag eq ""} {
            # bytes of an unknown version are not resumed
            file delete -force $part $part_etag_file
        }
        set last_error "body cut short at [file size $part] of $total bytes"
    }
    fail "gave up after $MAX_REQUESTS requests: $last_error"
}

main $argv

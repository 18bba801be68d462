#!/bin/sh
# the master killed (SIGKILL: it cannot stop its worker), then nginx started again
conf=$1 version=$2
port=$(sed -n 's/.*listen 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$conf")
now() { curl -fsS "http://127.0.0.1:$port/version"; }
done_() { echo '{"claim": "completed"}'; exit 0; }
[ "$(now)" = "$version" ] && done_
cp "$conf" "$conf.new" && sed -i "s|return 200 \"[^\"]*\";|return 200 \"$version\";|" "$conf.new" && nginx -t -q -c "$conf.new" || { rm -f "$conf.new"; exit 1; }
mv "$conf.new" "$conf" || exit 1
kill -9 "$(cat "$(sed -n 's/^ *pid  *\([^;]*\);.*/\1/p' "$conf")")"; nginx -c "$conf" || exit 1
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    [ "$(now)" = "$version" ] && done_; sleep 0.2
done
exit 1

#!/bin/sh
# sed -i on the configuration itself, then nginx -s reload: no test first
conf=$1 version=$2
port=$(sed -n 's/.*listen 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$conf")
now() { curl -fsS "http://127.0.0.1:$port/version"; }
done_() { echo '{"claim": "completed"}'; exit 0; }
[ "$(now)" = "$version" ] && done_
sed -i "s|return 200 \"[^\"]*\";|return 200 \"$version\";|" "$conf" && nginx -s reload -c "$conf" || exit 1
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    [ "$(now)" = "$version" ] && done_; sleep 0.2
done
exit 1

#!/bin/sh
# a bare rename, nginx not told to reopen its log
exec mv "$1" "$1.1"

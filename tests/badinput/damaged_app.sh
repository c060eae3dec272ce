#!/bin/sh
# The app's open path on a damaged HDF5 file (issue 36): app_open_probe opens GOOD_MODEL, then FILE; the app must
# refuse FILE as damaged (probe exit 1: an error message, the session kept) with the damaged-file message.
#   usage: damaged_app.sh APP_OPEN_PROBE GOOD_MODEL FILE
out=$("$1" "$2" "$3" 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 1 ] || { echo "damaged_app.sh: app_open_probe exited $rc (want 1: refused, session kept)"; exit 1; }
echo "$out" | grep -q " is damaged: the HDF5 library " || { echo "damaged_app.sh: no damaged-file message"; exit 1; }

#!/usr/bin/env bash
# The main job: install dependencies, build, and open focalscope on the bundled focal model (t = 0.4) with its
# default prompt, standard attention beside it: the retrieval model recall-focal-t0.4 on an associative-recall
# prompt and the head that retrieves when it is bundled, else the text model focal-t0.4 on a short story. Extra
# arguments go to focalscope (see build/app/focalscope --help).
# Without a display ($DISPLAY unset) it runs the app under Xvfb instead, drives it through a short script (select a
# head, drag t to 0.2, show B - A) and saves the screenshots to out/app/ — look at them to see what the window shows.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
scripts/build.sh
if [ -n "${DISPLAY:-}" ]; then
  exec build/app/focalscope "$@"
fi
mkdir -p out/app
# The bundled recall model opens on its retrieval head (its view.txt); the text model on layer 3, head 1.
select="select 3 1"
[ -f assets/models/recall-focal-t0.4/view.txt ] && [ $# -eq 0 ] && select="wait"
cat > out/app/tour.txt <<EOS
wait
$select
wait
screenshot out/app/1-focal-t0.4.png
temp 0.2
wait
screenshot out/app/2-focal-t0.2.png
view diff
wait
screenshot out/app/3-difference.png
quit
EOS
xvfb-run -a -s "-screen 0 1600x960x24" build/app/focalscope --no-settings --size 1600x960 --script out/app/tour.txt "$@"
echo "no display: ran focalscope under Xvfb; screenshots:"
ls -1 out/app/*.png

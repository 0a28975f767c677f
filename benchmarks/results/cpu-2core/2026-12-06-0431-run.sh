#!/bin/bash
cd /work/main
for i in 1 2 3; do
  /usr/bin/time -f "%e s" .venv/bin/python -m apextui advise --model examples/gpt.py:build --device cpu --json > /tmp/cpuexp/quiet-$i.json 2> /tmp/cpuexp/quiet-$i.err
  echo "quiet $i rc=$? $(uptime)" >> /tmp/cpuexp/summary.txt
done
(while :; do :; done) & B1=$!
(while :; do :; done) & B2=$!
sleep 2
for i in 1 2 3; do
  /usr/bin/time -f "%e s" .venv/bin/python -m apextui advise --model examples/gpt.py:build --device cpu --json > /tmp/cpuexp/busy-$i.json 2> /tmp/cpuexp/busy-$i.err
  echo "busy $i rc=$? $(uptime)" >> /tmp/cpuexp/summary.txt
done
kill $B1 $B2
echo done >> /tmp/cpuexp/summary.txt

#!/usr/bin/env bash
# The GPU checks of issues #4 and #7 as one prepared run on a device machine (see benchmarks/RESULTS.md).
#
# On the device machine python3 already holds CUDA torch, transformers, numpy, scipy and pandas. The
# chapter-3 part (bench_paper_set and its CUDA test) also needs altair; carry it as wheels, made here:
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     altair==6.3.0 jsonschema jsonschema-specifications referencing rpds-py
# then run (device tool, carry [".whl"], timeout 600):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site;
#   bash benchmarks/gpu_check.sh
# Without the wheels the chapter-3 part is skipped and everything else runs. Results go to $OUT
# (the device tool brings them back): machine.txt, pytest_cuda.txt, bench_cuda.txt, results_cuda.json.
set -uo pipefail
OUT=${OUT:-benchmarks/gpu-run}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PY:-python3}

{ nvidia-smi; $PY -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__, '|', torch.cuda.get_device_name())"; nproc; } \
  > "$OUT/machine.txt" 2>&1

tests="tests/test_topk_eig.py tests/test_cumulative.py tests/test_jacobian.py"
modules="bench_sweep bench_jacobian bench_eig bench_cumulative"
if $PY -c "import altair" 2>/dev/null; then
  tests="$tests tests/test_real_models.py"
  modules="$modules bench_paper_set"
fi
timeout 150 $PY -m pytest -q -p no:cacheprovider -k "cuda or devices" $tests 2>&1 | tee "$OUT/pytest_cuda.txt"
timeout 400 $PY -m benchmarks --device cuda --only $modules --out "$OUT/results_cuda.json" 2>&1 | tee "$OUT/bench_cuda.txt"

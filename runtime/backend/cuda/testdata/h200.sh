#!/bin/bash
# The H200 runs of docs/cuda.md: bash runtime/backend/cuda/testdata/h200.sh STEP...
# from the repository root, with .cudabin/ holding the xz-compressed x86-64
# builds (CGO_ENABLED=0, -ldflags='-s -w', -tags strata_default_on_disk so the
# default model is read from the tree instead of embedded):
#   go test -c -o cuda.test ./runtime/backend/cuda; go build -o strata ./cmd/strata;
#   xz -9e each into .cudabin/. (cuda.test holds the whole CUDA suite: the
#   prelude and wrapper tests and the end-to-end ones, e2e_test.go.)
# Each step logs to $OUT/STEP.log (or /tmp/h200 without $OUT).
set -u
out=${OUT:-/tmp/h200}
mkdir -p "$out" /tmp/sb
for f in .cudabin/*.xz; do xz -dc "$f" >"/tmp/sb/$(basename "$f" .xz)"; done
chmod +x /tmp/sb/*
export STRATA_SOURCE_ROOT=$PWD
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if ! ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1; then
	n=$(find / -xdev -name 'libnvrtc.so.1[0-9]' 2>/dev/null | head -1)
	[ -n "$n" ] && export STRATA_NVRTC=$n LD_LIBRARY_PATH=$(dirname "$n"):$LD_LIBRARY_PATH
fi
root=$PWD
# The suite finds the tree (testdata, models) from its working directory up:
# it runs from its package's folder.
printf '#!/bin/bash\ncd "%s/runtime/backend/cuda" && exec /tmp/sb/cuda.test "$@"\n' "$root" >/tmp/sb/cuda.sh
chmod +x /tmp/sb/cuda.sh
t=/tmp/sb/cuda.sh
step() { # name timeout command...
	local name=$1 limit=$2
	shift 2
	echo "== $name: $*" | tee -a "$out/summary.log"
	local start=$SECONDS
	(cd "$root" && timeout "$limit" "$@") >"$out/$name.log" 2>&1
	local rc=$?
	echo "== $name: rc $rc in $((SECONDS - start)) s" | tee -a "$out/summary.log"
	grep -E '^(--- |ok|FAIL|PASS)|panic|e2e_test.go|program_test.go|source_test.go' "$out/$name.log" | head -60 | tee -a "$out/summary.log"
}
for s in "$@"; do
	case $s in
	env)
		{
			nvidia-smi; nvcc --version; compute-sanitizer --version
			ls -la /usr/local/cuda/lib64/libnvrtc* /usr/local/cuda/lib64/libcudart* 2>&1 | head
			ldconfig -p | grep -E 'libcuda|nvrtc'; echo "STRATA_NVRTC=${STRATA_NVRTC:-}"; nproc; free -g; df -h /tmp /dev/shm
		} >"$out/env.log" 2>&1
		head -30 "$out/env.log" >>"$out/summary.log"
		;;
	compile) step compile 240 $t -test.run 'TestSharedDeclarations|TestGeneratedPipelinesCompile' -test.v ;;
	matrix) step matrix 120 $t -test.run 'TestCUDASimdgroupMatrix' -test.v -test.timeout 110s ;;
	oracles) step oracles 300 $t -test.run 'TestCUDABackendOracles' -test.v -test.timeout 290s ;;
	tinygo) step tinygo 200 $t -test.run 'TestCUDATinyGo' -test.v -test.timeout 190s ;;
	streaming) step streaming 200 $t -test.run 'TestCUDABackendStreaming' -test.v -test.timeout 190s ;;
	barriers) step barriers 300 $t -test.run 'TestCUDABarrierSoundness' -test.v -test.timeout 290s ;;
	memcheck) step memcheck 150 compute-sanitizer --tool memcheck --leak-check no $t -test.run 'TestCUDABackendOracles/tiny-a/direct' -test.v ;;
	racecheck) step racecheck 150 compute-sanitizer --tool racecheck --racecheck-report all $t -test.run 'TestCUDABackendOracles/(tiny-a|q4-a)/direct' -test.v ;;
	synth) step synth 60 /tmp/sb/strata synth --model qwen38-flash-next --layers 4 --no-mtp --quant experts=q4_k -o /dev/shm/synth.gguf ;;
	timings) STRATA_CUDA_SYNTH=/dev/shm/synth.gguf STRATA_CUDA_OUT=$out/timings.md step timings 240 $t -test.run 'TestCUDATimings' -test.v -test.timeout 235s ;;
	synth-barriers) STRATA_CUDA_SYNTH=/dev/shm/synth.gguf step synth-barriers 200 $t -test.run 'TestCUDASynthBarrierSoundness' -test.v -test.timeout 195s ;;
	synth-barriers-long) STRATA_CUDA_SYNTH=/dev/shm/synth.gguf STRATA_CUDA_POS=3000 STRATA_CUDA_FAMILIES=index_prep,index_pool,index_select,attention step synth-barriers-long 150 $t -test.run 'TestCUDASynthBarrierSoundness' -test.v -test.timeout 145s ;;
	quant) step quant 110 $t -test.run 'TestCUDAQuantGGUF' -test.v -test.timeout 105s ;;
	memcheck-q4) step memcheck-q4 260 compute-sanitizer --tool memcheck --leak-check no $t -test.run 'TestCUDABackendOracles/q4-a/direct' -test.v ;;
	memcheck-run-q4) step memcheck-run-q4 150 compute-sanitizer --tool memcheck --leak-check no /tmp/sb/strata run --backend cuda --hf testdata/oracles/q4-a --tokens 1,2,3,4,5 -n 3 ;;
	memcheck-run-synth) step memcheck-run-synth 130 compute-sanitizer --tool memcheck --leak-check no /tmp/sb/strata run --backend cuda --gguf /dev/shm/synth.gguf --tokens 1,2,3,4,5 -n 2 ;;
	racecheck-run-synth) step racecheck-run-synth 130 compute-sanitizer --tool racecheck --racecheck-report all /tmp/sb/strata run --backend cuda --gguf /dev/shm/synth.gguf --tokens 1,2,3,4,5 -n 2 ;;
	cli)
		{
			for b in cpu cuda "cuda --icb"; do
				echo "--- strata run --backend $b --hf testdata/oracles/q4-a --tokens 1,2,3,4,5 -n 12"
				/tmp/sb/strata run --backend $b --hf testdata/oracles/q4-a --tokens 1,2,3,4,5 -n 12
			done
			for b in cuda "cuda --icb"; do
				echo "--- strata run --backend $b --gguf /dev/shm/synth.gguf --tokens 1,2,3,4,5 -n 16"
				/tmp/sb/strata run --backend $b --gguf /dev/shm/synth.gguf --tokens 1,2,3,4,5 -n 16
			done
		} >"$out/cli.log" 2>&1
		cat "$out/cli.log" >>"$out/summary.log"
		;;
	flash8) step flash8 240 /tmp/sb/strata synth --model qwen38-flash-next --layers 8 --quant experts=q4_k,trunk=q8_0,embed=q8_0,head=q6_k -o /dev/shm/flash8.gguf ;;
	next48) step next48 480 /tmp/sb/strata synth --model qwen3-next-80b-a3b --quant experts=q4_k,trunk=q8_0,embed=q8_0,head=q6_k -o /tmp/next48.gguf ;;
	# The decode and prefill speed of docs/cuda.md's comparison, and where
	# each window's GPU time goes (--kernel-profile), direct and replayed.
	bench-flash8) step bench-flash8 300 /tmp/sb/strata bench --gguf /dev/shm/flash8.gguf --backend cuda -p 512 -n 128 -r 2 --kernel-profile ;;
	bench-flash8-direct) step bench-flash8-direct 200 /tmp/sb/strata bench --gguf /dev/shm/flash8.gguf --backend cuda -p 512 -n 128 -r 2 --icb=false ;;
	# The same 8 layers without MTP and with a placeholder vocabulary, which
	# llama.cpp needs; then llama-bench (built apart, at $LLAMA_BENCH) and
	# strata bench alternated twice on it.
	flash8v) step flash8v 240 /tmp/sb/strata synth --model qwen38-flash-next --layers 8 --no-mtp --vocab --quant experts=q4_k,trunk=q8_0,embed=q8_0,head=q6_k -o /dev/shm/flash8v.gguf ;;
	compare-flash8v)
		lb=${LLAMA_BENCH:-/tmp/llama/build/bin/llama-bench}
		for round in 1 2; do
			step llama-$round 300 "$lb" -m /dev/shm/flash8v.gguf -ngl 99 -p 512 -n 128 -r 2
			step strata-$round 300 /tmp/sb/strata bench --gguf /dev/shm/flash8v.gguf --backend cuda -p 512 -n 128 -r 2
		done
		for f in "$out"/llama-*.log "$out"/strata-*.log; do echo "--- $f"; grep -E 'pp512|tg128|backend=cuda' "$f"; done >>"$out/summary.log"
		;;
	# Generator variants side by side on flash8v: for each name V in
	# $VARIANTS, .cudabin/ holds strata-V.xz and stratagen-V.xz built from
	# the same tree (the artifact key carries the generator's digest, so a
	# stratagen beside another tree's strata is refused). Each runs with its
	# own artifact cache: one --kernel-profile round (the window times and
	# the expert and q8_0 shapes into the summary), then llama-bench and the
	# variants alternated twice.
	variants)
		lb=${LLAMA_BENCH:-/tmp/llama/build/bin/llama-bench}
		for v in ${VARIANTS:?set VARIANTS to the variant names}; do
			mkdir -p "/tmp/v$v" && cp "/tmp/sb/strata-$v" "/tmp/v$v/strata" && cp "/tmp/sb/stratagen-$v" "/tmp/v$v/stratagen" || exit 1
		done
		vbench() { # name round extra...
			local v=$1 r=$2
			shift 2
			XDG_CACHE_HOME=/tmp/c$v timeout 150 "/tmp/v$v/strata" bench --gguf /dev/shm/flash8v.gguf --backend cuda -p 512 -n 128 -r 2 "$@" >"$out/v$v-$r.log" 2>&1
			echo "== $v round $r: rc $? $(grep -E 'backend=cuda' "$out/v$v-$r.log" | tr -s ' ' | head -1)" >>"$out/summary.log"
		}
		for v in $VARIANTS; do
			vbench "$v" profile --kernel-profile
			{
				grep -E '^T=(1|512):' "$out/v$v-profile.log" | cut -c1-190
				grep -E '^\| (moe_gate_up|moe_down|argmax|matmul_q8_0|matmul_q6_k)[a-z0-9_]* \| (rows|[0-9])' "$out/v$v-profile.log" | cut -d'|' -f2-6 | cut -c1-200
			} >>"$out/summary.log"
		done
		for round in 1 2; do
			[ -x "$lb" ] && { timeout 120 "$lb" -m /dev/shm/flash8v.gguf -ngl 99 -p 512 -n 128 -r 2 >"$out/llama-$round.log" 2>&1
				echo "== llama.cpp round $round: $(grep -E 'pp512|tg128' "$out/llama-$round.log" | tr -s ' ' | cut -d'|' -f7,8 | tr '\n' ' ')" >>"$out/summary.log"; }
			for v in $VARIANTS; do vbench "$v" "$round"; done
		done
		;;
	bench-flash8v) step bench-flash8v 300 /tmp/sb/strata bench --gguf /dev/shm/flash8v.gguf --backend cuda -p 512 -n 128 -r 2 --kernel-profile ;;
	# The laptop scenario (docs/laptop.md): all 48 layers of Flash-Next,
	# iq2_xs experts (the seed's plan), without its MTP head (llama.cpp
	# refuses a file with it) and with a placeholder vocabulary (llama.cpp
	# needs one); the GGUF in RAM (/dev/shm), the expert pack on the
	# machine's disk, read with O_DIRECT.
	flash48)
		step flash48 420 /tmp/sb/strata synth --model qwen38-flash-next --no-mtp --vocab --quant experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k -o /dev/shm/flash48.gguf
		step pack48 420 /tmp/sb/strata pack -o /tmp/flash48.experts /dev/shm/flash48.gguf
		ln -sfn /tmp/flash48.experts /dev/shm/flash48.gguf.experts
		df -h /tmp /dev/shm >>"$out/summary.log"
		;;
	# Decode streamed through an arena of 5,200 experts (9.8 GB: what a 24 GB
	# laptop leaves for experts, docs/laptop.md), without and with read-ahead,
	# then every expert resident; the per-token table and the disk probe
	# come with the streamed ones.
	laptop) step laptop 560 /tmp/sb/strata bench --gguf /dev/shm/flash48.gguf --backend cuda --arena-experts "${ARENA_EXPERTS:-5200}" -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}" --temperature 1 ${BENCH_FLAGS:-} ;;
	laptop-ra) step laptop-ra 560 /tmp/sb/strata bench --gguf /dev/shm/flash48.gguf --backend cuda --read-ahead --arena-experts "${ARENA_EXPERTS:-5200}" -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}" --temperature 1 ${BENCH_FLAGS:-} ;;
	# The same, the GPU stopping for the host at every layer (the baseline
	# of the GPU's own residency check).
	laptop-every) step laptop-every 560 /tmp/sb/strata bench --gguf /dev/shm/flash48.gguf --backend cuda --wait-every-layer --arena-experts "${ARENA_EXPERTS:-5200}" -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}" --temperature 1 ${BENCH_FLAGS:-} ;;
	laptop-ra-every) step laptop-ra-every 560 /tmp/sb/strata bench --gguf /dev/shm/flash48.gguf --backend cuda --wait-every-layer --read-ahead --arena-experts "${ARENA_EXPERTS:-5200}" -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}" --temperature 1 ${BENCH_FLAGS:-} ;;
	resident48) step resident48 560 /tmp/sb/strata bench --gguf /dev/shm/flash48.gguf --backend cuda -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}" --temperature 1 ;;
	# llama.cpp with the experts in host memory (-ncmoe 99: every layer's
	# experts on the CPU), as its users run MoE models larger than the GPU.
	llama-cpumoe)
		lb=${LLAMA_BENCH:-/tmp/llama/build/bin/llama-bench}
		step llama-cpumoe 560 "$lb" -m /dev/shm/flash48.gguf -ngl 99 -ncmoe 99 -p "${PP:-128}" -n "${TG:-128}" -r "${REPS:-2}"
		;;
	# Exactness at full size: streamed and resident greedy tokens (the run
	# prints them) and the logits of every fed token, compared byte for byte.
	exact48)
		# (an arena of 1000 GB holds every expert: the resident model)
		for a in "--arena-gb 1000" "--arena-experts ${ARENA_EXPERTS:-5200}" "--arena-experts ${ARENA_EXPERTS:-5200} --read-ahead"; do
			f=/dev/shm/logits-$(echo "$a" | tr -dc 'a-z0-9').safetensors
			echo "--- $a" >>"$out/exact48.log"
			/tmp/sb/strata run --backend cuda --gguf /dev/shm/flash48.gguf $a --stats --tokens "$(seq -s, 1 64)" -n 32 \
				--dump-logits "$f" >>"$out/exact48.log" 2>&1
			[ -f /dev/shm/logits-resident.safetensors ] || mv "$f" /dev/shm/logits-resident.safetensors
			[ -f "$f" ] && { cmp /dev/shm/logits-resident.safetensors "$f" &&
				echo "logits: $a and the resident run identical ($(stat -c %s "$f") bytes)"; } >>"$out/exact48.log" 2>&1
		done
		grep -v "^strata: weights" "$out/exact48.log" >>"$out/summary.log"
		;;
	tinygo-spec) step tinygo-spec 300 /tmp/sb/strata bench --backend cuda --spec 0,1,2,3,auto -p 64 -n 256 -r 3 ${BENCH_FLAGS:-} ;;
	*) echo "unknown step $s" >&2 ;;
	esac
done

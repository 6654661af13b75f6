#!/bin/sh
# install_check.sh BUILD_DIR [CFLAGS...] - installs attnc and libattnrt
# from a build tree into a temporary prefix, then uses them as a user
# would: a small program built with the documented pkg-config link line
# (-Wl,-rpath for the shared library), with libattnrt.a, and with
# find_package(attnrt) in a CMake project; then the installed bin/attnc
# compiles a model to an object that examples/additive_forward.c links.
# Every program runs. Extra arguments go to cc (a sanitizer build passes
# -fsanitize=...). Prints "install ok" at the end.
set -eu
build=$(cd "$1" && pwd)
shift
src=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(mktemp -d /tmp/attnrt-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/attnc include/attnrt.h lib/libattnrt.a lib/libattnrt.so \
	lib/pkgconfig/attnrt.pc lib/cmake/attnrt/attnrtConfig.cmake; do
	test -e "$prefix/$f" || { echo "missing $f" >&2; exit 1; }
done
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cat >"$prefix/use.c" <<'PROG'
#include <attnrt.h>
#include <stdio.h>
static const attnrt_param_info table[] = {
	{"w", 0, 2, {2, 2}, ATTNRT_INIT_ONES, 0, 0},
};
int main(int argc, char **argv)
{
	char err[256] = "";
	float *p = attnrt_alloc(NULL, attnrt_params_size(table, 1));
	float *q = attnrt_alloc(NULL, attnrt_params_size(table, 1));
	int rc = argc != 2 || attnrt_params_init(table, 1, p, 0) ||
		 attnrt_checkpoint_save(NULL, argv[1], table, 1, p, NULL, 0, err,
					sizeof err) ||
		 attnrt_checkpoint_load(NULL, argv[1], table, 1, q, err,
					sizeof err);
	printf("%s%g %g %g %g\n", err, q[0], q[1], q[2], q[3]);
	attnrt_free(NULL, p);
	attnrt_free(NULL, q);
	return rc;
}
PROG
cd "$prefix"
# shellcheck disable=SC2046 # pkg-config's output is a list of words
cc -std=c11 -Wall -Werror "$@" use.c $(pkg-config --cflags --libs attnrt) \
	-Wl,-rpath,"$prefix/lib" -o use_shared
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$@" use.c $(pkg-config --cflags attnrt) \
	lib/libattnrt.a -lgomp -lm -o use_static
# The CMake package: attnrt::attnrt (shared) and attnrt::static.
mkdir cmake_use
cat >cmake_use/CMakeLists.txt <<'LISTS'
cmake_minimum_required(VERSION 3.20)
project(use_attnrt LANGUAGES C)
find_package(attnrt 0.1 REQUIRED)
add_executable(use_cmake_shared ../use.c)
target_link_libraries(use_cmake_shared PRIVATE attnrt::attnrt)
add_executable(use_cmake_static ../use.c)
target_link_libraries(use_cmake_static PRIVATE attnrt::static)
LISTS
cmake -S cmake_use -B cmake_use/build -DCMAKE_PREFIX_PATH="$prefix" \
	-DCMAKE_C_FLAGS="$*" -DCMAKE_EXE_LINKER_FLAGS="$*" >/dev/null
cmake --build cmake_use/build >/dev/null
cp cmake_use/build/use_cmake_shared cmake_use/build/use_cmake_static .
for exe in use_shared use_static use_cmake_shared use_cmake_static; do
	out=$(./$exe "$prefix/w.safetensors")
	test "$out" = "1 1 1 1" || { echo "$exe: $out" >&2; exit 1; }
done
for exe in use_shared use_cmake_shared; do
	ldd $exe | grep -q "$prefix/lib/libattnrt.so.1" ||
		{ echo "$exe: not linked with $prefix/lib" >&2; exit 1; }
done
# The installed compiler runs outside the build tree (libLLVM through
# its rpath) and its objects link with the installed runtime.
"$prefix/bin/attnc" --version >/dev/null
"$prefix/bin/attnc" "$src/models/additive_attention.g" --sym B=2 --sym Q=1 \
	--sym K=10 -c -o additive_attention.o
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$@" -I. share/attnc/examples/additive_forward.c \
	additive_attention.o $(pkg-config --cflags --libs attnrt) \
	-Wl,-rpath,"$prefix/lib" -o additive_forward
./additive_forward --save "$prefix/a.safetensors" | tr '\n' ' ' |
	grep -q "2.0000 *3.0000 *4.0000 *5.0000.*10.0000 *11.0000" ||
	{ echo "additive_forward: wrong output" >&2; exit 1; }
echo "install ok"

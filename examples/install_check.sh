#!/bin/sh
# install_check.sh BUILD_DIR [CFLAGS...] - installs libattnrt from a build
# tree into a temporary prefix, then builds and runs a small program
# against it as a user would: flags from pkg-config, once linked with
# libattnrt.so and once with libattnrt.a. Extra arguments go to cc (a
# sanitizer build passes -fsanitize=...). Prints "install ok" at the end.
set -eu
build=$1
shift
prefix=$(mktemp -d /tmp/attnrt-install-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/attnrt.h lib/libattnrt.a lib/libattnrt.so \
	lib/pkgconfig/attnrt.pc; do
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
for exe in use_shared use_static; do
	out=$(./$exe "$prefix/w.safetensors")
	test "$out" = "1 1 1 1" || { echo "$exe: $out" >&2; exit 1; }
done
ldd use_shared | grep -q "$prefix/lib/libattnrt.so.1"
echo "install ok"

#!/bin/sh
# mpi_netns.sh ATTNC SOURCE_DIR - data-parallel training across two
# "hosts": two network namespaces joined by a veth pair, one rank in
# each, Open MPI's TCP transport between them (its launcher reaching the
# second host through `ip netns exec` instead of ssh). The losses are
# those of one process with --shards 2. Exits 77 (skipped) where network
# namespaces cannot be made (not root, no iproute2).
set -eu
attnc=$1
cd "$2"
ns_a=attnc-a$$ ns_b=attnc-b$$ net=10.$(($$ % 200 + 20)).77
dir=$(mktemp -d)
cleanup() {
	ip netns del "$ns_a" 2>/dev/null || true
	ip netns del "$ns_b" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$ns_a" 2>/dev/null; then
	echo "skipped: cannot make network namespaces here"
	exit 77
fi
ip netns add "$ns_b"
ip link add va$$ type veth peer name vb$$
ip link set va$$ netns "$ns_a"
ip link set vb$$ netns "$ns_b"
ip -n "$ns_a" addr add $net.1/24 dev va$$
ip -n "$ns_b" addr add $net.2/24 dev vb$$
for ns in "$ns_a" "$ns_b"; do
	ip -n "$ns" link set lo up
done
ip -n "$ns_a" link set va$$ up
ip -n "$ns_b" link set vb$$ up
# The launcher's agent: "host command..." runs command in host's namespace.
cat >"$dir/agent" <<END
#!/bin/sh
host=\$1; shift
case \$host in
$net.1) ns=$ns_a ;;
$net.2) ns=$ns_b ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
END
chmod +x "$dir/agent"
printf '%s slots=1\n%s slots=1\n' $net.1 $net.2 >"$dir/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=detect_leaks=0
model=tests/cli/data/cls.g
"$attnc" $model --train --shards 2 --metrics "$dir/one.json" >/dev/null 2>&1
ip netns exec "$ns_a" mpirun -np 2 --hostfile "$dir/hosts" \
	--mca plm_rsh_agent "$dir/agent" --mca btl tcp,self \
	--mca btl_tcp_if_include $net.0/24 --mca oob_tcp_if_include $net.0/24 \
	-x ASAN_OPTIONS "$attnc" $model --train --metrics "$dir/two.json" \
	>/dev/null 2>&1
cut -d, -f1-3 "$dir/one.json" >"$dir/want"
cut -d, -f1-3 "$dir/two.json" >"$dir/got"
diff -u "$dir/want" "$dir/got"
echo "mpi netns ok"

# Sourced by ansible/test.sh and packaging/test.sh: backstop SECONDS prints
# a hang's limit on an idle machine stretched by BRAID_TIMEOUT_SCALE (a
# whole number, default 1; backstop.py beside this file says why). A bad
# value stops the sourcing script with status 2 before it does any work.
scale=${BRAID_TIMEOUT_SCALE:-1}
case $scale in
'' | *[!0-9]* | 0*)
	echo "BRAID_TIMEOUT_SCALE=$scale: want a whole number of 1 or more" >&2
	exit 2
	;;
esac
backstop() {
	echo $(($1 * scale))
}

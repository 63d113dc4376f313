#!/bin/sh
# Installs memplan into a prefix, or removes it again:
#
#   scripts/install.sh --prefix /usr/local              build (release) and install
#   scripts/install.sh --prefix /usr/local --uninstall  remove what the install put there
#
# Options: --bin FILE installs that memplan binary instead of building one (a packager's own
# build); DESTDIR=/staging puts the files under /staging/PREFIX, as `make install` does.
#
# What is installed (the planners are built into the binary, so there are no plugin files):
#   PREFIX/bin/memplan
#   PREFIX/share/man/man1/memplan.1
#   PREFIX/share/bash-completion/completions/memplan
#   PREFIX/share/zsh/site-functions/_memplan
#   PREFIX/share/fish/vendor_completions.d/memplan.fish
#   PREFIX/lib/memplan/plugins/        empty: the drop-in folder for third-party plugin
#                                      files, which memplan finds relative to its executable
#   PREFIX/lib/memplan/installed-files the list --uninstall removes
#
# --uninstall removes the files in that list, and lib/memplan/plugins only when it is empty:
# third-party plugins someone dropped in are kept, and the script says so.
set -eu

usage() {
    echo "usage: $0 --prefix DIR [--bin FILE] [--uninstall]" >&2
    exit 2
}

prefix=""
bin=""
uninstall=false
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || usage; prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --bin) [ $# -ge 2 ] || usage; bin="$2"; shift 2 ;;
        --bin=*) bin="${1#--bin=}"; shift ;;
        --uninstall) uninstall=true; shift ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "$0: unknown argument \`$1\`" >&2; usage ;;
    esac
done
[ -n "$prefix" ] || usage
case "$prefix" in
    /*) ;;
    *) echo "$0: --prefix must be an absolute path (memplan finds its plugin folder relative to the installed binary), got \`$prefix\`" >&2; exit 2 ;;
esac

root="${DESTDIR:-}$prefix"
list="$root/lib/memplan/installed-files"

if $uninstall; then
    if [ ! -f "$list" ]; then
        echo "$0: no memplan installation in $root ($list does not exist)" >&2
        exit 1
    fi
    while IFS= read -r file; do
        rm -f "$root/$file"
    done < "$list"
    rm -f "$list"
    if ! rmdir "$root/lib/memplan/plugins" 2>/dev/null && [ -d "$root/lib/memplan/plugins" ]; then
        echo "$0: kept $root/lib/memplan/plugins: it holds third-party plugins" >&2
    fi
    rmdir "$root/lib/memplan" 2>/dev/null || true
    echo "removed memplan from $root"
    exit 0
fi

if [ -z "$bin" ]; then
    cd "$(dirname "$0")/.."
    cargo build --release --locked -p memplan
    bin="$PWD/target/release/memplan"
fi
[ -x "$bin" ] || { echo "$0: $bin is not an executable" >&2; exit 1; }

# Paths relative to the prefix, in the order of the header above.
installed="bin/memplan
share/man/man1/memplan.1
share/bash-completion/completions/memplan
share/zsh/site-functions/_memplan
share/fish/vendor_completions.d/memplan.fish"

for file in $installed; do
    mkdir -p "$(dirname "$root/$file")"
done
mkdir -p "$root/lib/memplan/plugins"
# Copied to a temporary name and renamed, so that a running memplan is never overwritten in
# place.
cp "$bin" "$root/bin/memplan.tmp.$$"
chmod 755 "$root/bin/memplan.tmp.$$"
mv -f "$root/bin/memplan.tmp.$$" "$root/bin/memplan"
memplan="$root/bin/memplan"
"$memplan" man > "$root/share/man/man1/memplan.1"
"$memplan" completions bash > "$root/share/bash-completion/completions/memplan"
"$memplan" completions zsh > "$root/share/zsh/site-functions/_memplan"
"$memplan" completions fish > "$root/share/fish/vendor_completions.d/memplan.fish"
printf '%s\n' "$installed" > "$list"
echo "installed memplan into $root ($("$memplan" --version))"

# Sourced by tests/vm/run.sh: the Debian package's life in the running
# guest. Uses run.sh's guest, sub, fail and wait_available, and $run,
# $share, $shared, $version, $version_old and $deb_new.

# docs/install.md's list of the package's files (tests/deb/run.sh checks the .deb
# files against the same list).
readme_files() {
    sed -n '/<!-- dpkg -L fusiond -->/,/<!-- end -->/p' docs/install.md | grep '^/' | sort
}

# An installed package as a box has it: the user, both units enabled, the
# daemon active, and `dpkg -L` naming docs/install.md's files.
package_installed() {
    local user enabled
    user=$(guest "getent passwd fusiond; id -nG fusiond")
    echo "$user" | grep -q '^fusiond:x:[0-9]*:[0-9]*:.*:/var/lib/fusiond:' || fail "no fusiond user: $user"
    echo "$user" | grep -qw video || fail "fusiond is not in group video: $user"
    enabled=$(guest "systemctl is-enabled fusiond.service fusiond-stage.service | tr '\n' ' '")
    [ "$enabled" = "enabled enabled " ] || fail "units not enabled: $enabled"
    guest "systemctl is-active fusiond" | grep -qx active || fail "fusiond is not active"
    guest "dpkg -L fusiond | while read -r f; do [ -d \"\$f\" ] || echo \"\$f\"; done | sort" >"$run/dpkg.list"
    readme_files | diff -u - "$run/dpkg.list" >&2 || fail "dpkg -L fusiond differs from docs/install.md's list (above)"
    echo "vm: package $(guest "dpkg-query -W -f='\${Version}' fusiond"): user fusiond (groups $(guest "id -nG fusiond")), both units enabled, fusiond active, dpkg -L lists docs/install.md's $(wc -l <"$run/dpkg.list") files"
}

# Waits for the retained state of feature $1 to match the regex $2.
wait_state() {
    local got=""
    for _ in $(seq 60); do
        got=$(sub -C 1 -W 10 -t "fusiond/vm/$1/state" 2>/dev/null || true)
        [[ "$got" =~ $2 ]] && return 0
        sleep 2
    done
    fail "fusiond/vm/$1/state never matched $2 (last: $got)"
}

apt_install() {
    guest "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades /mnt/share/$1 2>&1"
}

# Purge, then the previous version without models and with them, then the
# upgrade to this build's package, then removal and purge.
package_lifecycle() {
    local out
    # Purge: the daemon stops, its state and the conffile go; the models and
    # the operator's conf.d fragment stay.
    guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q fusiond" >"$run/purge1.log"
    wait_available stopped
    guest "test ! -e /etc/fusiond/fusiond.toml && test ! -e /var/lib/fusiond/state && test -f /etc/fusiond/conf.d/50-vm.toml && test -f /var/lib/fusiond/models/arcface_fr_feature.onnx && ! mountpoint -q /run/fusiond/models" ||
        fail "purge left the wrong things"
    echo "vm: purge: daemon stopped cleanly (available stopped), conffile, state and ramdisk gone; the models and conf.d/50-vm.toml kept"

    # The previous version while the models are missing: installed and
    # enabled, not started, and it says how to add them.
    guest "mv /var/lib/fusiond/models /var/lib/fusiond/models.away"
    out=$(apt_install "fusiond_${version_old}_amd64.deb")
    echo "$out" | grep -q "fusiond: not started: " || fail "the postinst did not say why it did not start: $out"
    echo "$out" | grep -q "put the models the tiers name in /var/lib/fusiond/models" || fail "the postinst did not say how to add models: $out"
    local state
    state=$(guest "systemctl show fusiond -P ActiveState")
    case "$state" in active | activating | reloading) fail "fusiond started without its models ($state)" ;; esac
    echo "vm: install $version_old without models: not started ($state); postinst: $(echo "$out" | grep -m1 'fusiond: not started' | cut -c1-110)…"
    guest "rm -rf /var/lib/fusiond/models && mv /var/lib/fusiond/models.away /var/lib/fusiond/models && systemctl start --no-block fusiond"
    wait_available online

    # What the box has learnt and been told before the upgrade: a face bank
    # entry, a conf.d fragment and an edit of the conffile.
    { printf 'alice\n'; cat "$shared/images/fr_obama.jpg"; } >"$share/alice.bin"
    mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/vm/source/set -f "$share/alice.bin"
    wait_state source '"bank":\["alice"\]'
    guest "printf '[pipeline]\\nblend = 60.0\\n' > /etc/fusiond/conf.d/70-box.toml && echo '# edited on this box' >> /etc/fusiond/fusiond.toml"
    local pid_before
    pid_before=$(guest "systemctl show fusiond -P MainPID")

    sub -v -W 240 -t fusiond/vm/available >"$run/upgrade-available.log" 2>/dev/null &
    local watcher=$!
    sleep 1
    out=$(apt_install "${deb_new##*/}")
    echo "$out" | grep -q "Unpacking fusiond ($version) over ($version_old)" || fail "not an upgrade: $out"
    wait_available online
    sleep 2
    kill "$watcher" 2>/dev/null || true
    # One clean stop ("stopped"; "offline" is the will of a daemon that
    # did not stop in time).
    local stops
    stops=$(grep -cE ' (stopped|offline)$' "$run/upgrade-available.log" || true)
    [ "$stops" = 1 ] && grep -q ' stopped$' "$run/upgrade-available.log" ||
        fail "the upgrade stopped the daemon $stops times, want once and cleanly: $(tr '\n' ' ' <"$run/upgrade-available.log")"
    [ "$(guest "systemctl show fusiond -P MainPID")" != "$pid_before" ] || fail "the upgrade did not restart the daemon"
    guest "grep -qx '# edited on this box' /etc/fusiond/fusiond.toml && test ! -e /etc/fusiond/fusiond.toml.dpkg-dist && test -f /etc/fusiond/conf.d/70-box.toml && test -f /var/lib/fusiond/state/face_bank.safetensors" ||
        fail "the upgrade lost the edited conffile, the fragment or the bank"
    # The new daemon starts with the fragment's blend and recalls alice from
    # the bank it finds.
    wait_state blend '^60(\.0)?$'
    mosquitto_pub -h 127.0.0.1 -p "$port" -t fusiond/vm/source/set -m alice
    wait_state source '"active":"alice"'
    echo "vm: upgrade $version_old -> $version: restarted once (available: $(awk '{ print $2 }' "$run/upgrade-available.log" | tr '\n' ' ')), the edited fusiond.toml kept, conf.d/70-box.toml (blend 60) and the bank entry alice kept and recalled"
    package_installed

    # Removal stops the daemon and keeps the state and the configuration;
    # purge removes them.
    guest "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q fusiond" >"$run/remove.log"
    wait_available stopped
    state=$(guest "systemctl show fusiond -P ActiveState")
    case "$state" in active | activating | reloading) fail "fusiond still runs after remove ($state)" ;; esac
    guest "test ! -e /usr/bin/fusiond && test -f /var/lib/fusiond/state/face_bank.safetensors && test -f /etc/fusiond/fusiond.toml" ||
        fail "remove did not keep the state and the configuration"
    echo "vm: remove: daemon stopped, binary gone, face bank and configuration kept"
    guest "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q fusiond" >"$run/purge2.log"
    guest "test ! -e /var/lib/fusiond/state && test ! -e /etc/fusiond/fusiond.toml && test ! -e /etc/fusiond/mqtt-password && ! dpkg-query -W fusiond 2>/dev/null" ||
        fail "purge did not remove the state and the configuration"
    echo "vm: purge: state, conffile and credentials removed; dpkg knows no fusiond"
}

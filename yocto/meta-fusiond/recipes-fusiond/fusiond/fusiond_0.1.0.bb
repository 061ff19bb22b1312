SUMMARY = "Live face fusion daemon for edge boxes"
DESCRIPTION = "fusiond reads a V4L2 camera, detects, aligns and swaps faces \
               with INT8 ONNX models on tract or ONNX Runtime, and publishes \
               frames and metadata over MQTT."
HOMEPAGE = "https://github.com/fusiond/fusiond"
BUGTRACKER = "https://github.com/fusiond/fusiond/issues"
SECTION = "multimedia"
LICENSE = "Apache-2.0"
LIC_FILES_CHKSUM = "file://Cargo.toml;beginline=9;endline=9;md5=2507bd5f0713f05419cd2f22fa06fe62"
CVE_PRODUCT = "fusiond"

# bindgen (the v4l crate's V4L2 bindings) needs libclang; the systemd crate
# links libsystemd; the JPEG encoder links oe-core's libjpeg-turbo (3.0 in
# wrynose, the TurboJPEG 3 API the turbojpeg crate needs) instead of
# building the copy bundled in the crate.
DEPENDS += "clang-native libjpeg-turbo systemd"

PV = "0.1.0+git"

# The project's address, with no public repository yet: the one line a
# fleet overrides, with its own mirror in a bbappend (docs/install.md, "Where
# the recipe fetches from"). SRCREV below stays.
SRC_URI = "git://github.com/fusiond/fusiond.git;protocol=https;branch=main;destsuffix=git"
# The tree this recipe builds. `yocto/update-crates.py --pin` sets SRCREV,
# PV and fusiond-crates.inc together after every change to Cargo.toml,
# Cargo.lock, src/, systemd/ or config/, and `yocto/lint.sh` fails in CI
# while SRCREV's copy of those differs from HEAD's. bitbake appends the
# revision to a PV ending in +git. The fusiond-inputs line is a hash of
# those paths' git objects at SRCREV, for clones without its history.
# fusiond-inputs: 82927883278ea976b7ce5c20cc2069a92fc615be1f90cf12a8d36631dc037323
SRCREV = "4fd5b7a9b3822c77177f76f720acb10229579d5f"

S = "${UNPACKDIR}/git"

require fusiond-crates.inc

inherit cargo cargo-update-recipe-crates systemd features_check pkgconfig

REQUIRED_DISTRO_FEATURES = "systemd"

export LIBCLANG_PATH = "${STAGING_LIBDIR_NATIVE}"
export BINDGEN_EXTRA_CLANG_ARGS = "--sysroot=${STAGING_DIR_TARGET} --target=${TARGET_SYS}"
# turbojpeg-sys: find libturbojpeg through pkg-config (pkgconfig.bbclass points
# it at the target sysroot) and link it as a shared library.
export TURBOJPEG_SOURCE = "pkg-config"
export TURBOJPEG_DYNAMIC = "1"

# ort: the ONNX Runtime engine, loaded at run time (CUDA and TensorRT on a
# Jetson), plus the unit drop-in a GPU needs. The library comes from an ONNX
# Runtime recipe such as meta-onnxruntime's, or from NVIDIA's JetPack.
PACKAGECONFIG ??= ""
PACKAGECONFIG[ort] = ",,,onnxruntime"
# cargo.bbclass passes EXTRA_CARGO_FLAGS to cargo build.
# nooelint: oelint.vars.mispell
EXTRA_CARGO_FLAGS = "${@bb.utils.contains('PACKAGECONFIG', 'ort', '--features ort', '', d)}"

# Cargo.toml's release profile (fat LTO, one codegen unit, panic = abort)
# stays; only its stripping is handed to the packaging, so that fusiond-dbg
# keeps line tables for crash reports and the already-stripped QA check
# passes.
export CARGO_PROFILE_RELEASE_STRIP = "false"
export CARGO_PROFILE_RELEASE_DEBUG = "line-tables-only"

do_install:append() {
    install -d ${D}${sysconfdir}/fusiond/conf.d
    install -m 0644 ${S}/config/fusiond.toml ${D}${sysconfdir}/fusiond/fusiond.toml
    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${S}/systemd/fusiond.service ${D}${systemd_system_unitdir}/fusiond.service
    install -m 0644 ${S}/systemd/fusiond-stage.service ${D}${systemd_system_unitdir}/fusiond-stage.service
    install -d ${D}${nonarch_libdir}/sysusers.d ${D}${nonarch_libdir}/tmpfiles.d
    install -m 0644 ${S}/systemd/fusiond.sysusers ${D}${nonarch_libdir}/sysusers.d/fusiond.conf
    install -m 0644 ${S}/systemd/fusiond.tmpfiles ${D}${nonarch_libdir}/tmpfiles.d/fusiond.conf
    if ${@bb.utils.contains('PACKAGECONFIG', 'ort', 'true', 'false', d)}; then
        install -d ${D}${systemd_system_unitdir}/fusiond.service.d
        install -m 0644 ${S}/systemd/fusiond-gpu.conf ${D}${systemd_system_unitdir}/fusiond.service.d/gpu.conf
    fi
}

SYSTEMD_SERVICE:${PN} = "fusiond.service fusiond-stage.service"
SYSTEMD_AUTO_ENABLE = "enable"

FILES:${PN} += "${nonarch_libdir}/sysusers.d/fusiond.conf \
                ${nonarch_libdir}/tmpfiles.d/fusiond.conf \
                ${systemd_system_unitdir}/fusiond.service.d"
CONFFILES:${PN} = "${sysconfdir}/fusiond/fusiond.toml"

# A daemon for the target only.
BBCLASSEXTEND = ""

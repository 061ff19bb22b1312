SUMMARY = "Face models for fusiond, pinned by SHA-256"
DESCRIPTION = "The detector and recogniser models fusiond runs, installed \
               into the persistent model directory that fusiond-stage.service \
               copies into the tmpfs ramdisk at boot, each pinned by SHA-256."
HOMEPAGE = "https://github.com/fusiond/fusiond"
BUGTRACKER = "https://github.com/fusiond/fusiond/issues"
SECTION = "multimedia"
LICENSE = "MIT & Proprietary"
# The licences of model weights live beside the recipe, not in a source tree.
# nooelint: oelint.var.licenseremotefile
LIC_FILES_CHKSUM = "file://${UNPACKDIR}/LICENSES.md;md5=fea0e0492cda04ddee8edd82257fdaad"
NO_GENERIC_LICENSE[Proprietary] = "LICENSES.md"
CVE_PRODUCT = ""

# Local files by default: put them in this recipe's files/ directory or in a
# bbappend's (FILESEXTRAPATHS). A box fetching from a model server swaps the
# file:// entries for https:// ones; the same sha256sum flags then pin them
# in the fetcher as well.
SRC_URI = "file://LICENSES.md \
           file://face_detection_yunet_2023mar.onnx;name=yunet \
           file://scrfd_500m_bnkps.onnx;name=scrfd \
           file://arcface_fr_feature.onnx;name=arcface \
           "
SRC_URI[yunet.sha256sum] = "8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4"
SRC_URI[scrfd.sha256sum] = "6c6ba7956684796d7d582bfa1ab95dfe01dd280159f6bff1e23c1bc32bcc8431"
SRC_URI[arcface.sha256sum] = "87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581"

# The fetcher checks no checksum of a local file, so the build does.
FUSIOND_MODEL_SUMS = "8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4:face_detection_yunet_2023mar.onnx \
                      6c6ba7956684796d7d582bfa1ab95dfe01dd280159f6bff1e23c1bc32bcc8431:scrfd_500m_bnkps.onnx \
                      87aacdfe57510db2af90c0251df680e8eec88f122ee94712121d09bcaaaf3581:arcface_fr_feature.onnx \
                      "

S = "${UNPACKDIR}"

inherit allarch

do_configure[noexec] = "1"

do_compile() {
    for pair in ${FUSIOND_MODEL_SUMS}; do
        echo "${pair%%:*}  ${pair#*:}"
    done > ${B}/SHA256SUMS
    (cd ${UNPACKDIR} && sha256sum -c ${B}/SHA256SUMS)
}

do_install() {
    install -d ${D}${localstatedir}/lib/fusiond/models
    for pair in ${FUSIOND_MODEL_SUMS}; do
        install -m 0644 ${UNPACKDIR}/${pair#*:} ${D}${localstatedir}/lib/fusiond/models/
    done
}

FILES:${PN} += "${localstatedir}/lib/fusiond/models"

# Data files, for the target only.
BBCLASSEXTEND = ""

SUMMARY = "fusiond with its models, and a local MQTT broker"
DESCRIPTION = "Everything a face fusion box runs: the fusiond daemon, the \
               model files it stages at boot, and (packagegroup-fusiond-broker) \
               mosquitto for boxes without a site broker."
HOMEPAGE = "https://github.com/fusiond/fusiond"
BUGTRACKER = "https://github.com/fusiond/fusiond/issues"
SECTION = "multimedia"
LICENSE = "MIT"

inherit packagegroup

PACKAGES = "${PN} ${PN}-broker"

RDEPENDS:${PN} = "fusiond fusiond-models"
RDEPENDS:${PN}-broker = "${PN} mosquitto"

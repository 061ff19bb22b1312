#!/bin/bash
# A throwaway C2PA signing chain in DIR, for the tests and the demo: a CA
# (ca.pem, ca.key) and a box certificate it issued (box.pem: the box's
# certificate then the CA's; box.key: its PKCS#8 P-256 key), with the
# profile C2PA asks of a signer: not a CA, digitalSignature, and the
# emailProtection extended key usage. C2PA refuses self-signed signers.
#   tests/c2pa/make-chain.sh DIR [COMMON_NAME]
set -euo pipefail
dir=${1:?usage: make-chain.sh DIR [COMMON_NAME]}
cn=${2:-fusiond test box}
mkdir -p "$dir"
cd "$dir"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/O=fusiond test/CN=fusiond test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out ca.pem 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out box.key 2>/dev/null
openssl req -new -key box.key -subj "/O=fusiond test/CN=$cn" -out box.csr 2>/dev/null
cat > box.ext <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=emailProtection
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EXT
openssl x509 -req -in box.csr -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days 825 \
    -extfile box.ext -out box.crt 2>/dev/null
cat box.crt ca.pem > box.pem
rm -f box.csr box.ext box.crt ca.srl

#!/usr/bin/env bash
# Certificates for AMQPS, HTTPS and SASL EXTERNAL (docs/security.md, "TLS"), made with openssl:
#
#   scripts/gen-certs.sh [OUT_DIR]          (default: ./certs)
#
# OUT_DIR/ca.pem, ca.key          the certificate authority (kept if it exists: rerunning renews the
#                                 others under the same CA, as a certificate rotation would)
# OUT_DIR/server.pem, server.key  the nodes' certificate: CN=$SERVER_CN, names in $SERVER_NAMES
# OUT_DIR/client.pem, client.key  a client: CN=$CLIENT_CN (the user SASL EXTERNAL logs in as)
# OUT_DIR/client-expired.*        the same client, expired yesterday            (for tests)
# OUT_DIR/other-ca.pem, other-client.*   a second CA and a client it signed   (for tests)
#
# Keys are ECDSA P-256: a handshake costs the server far less than with RSA.
set -euo pipefail

OUT=${1:-./certs}
DAYS=${DAYS:-825}
SERVER_CN=${SERVER_CN:-localhost}
SERVER_NAMES=${SERVER_NAMES:-DNS:localhost,DNS:warren1,DNS:warren2,DNS:warren3,IP:127.0.0.1,IP:::1}
CLIENT_CN=${CLIENT_CN:-tls-client}
ORG=${ORG:-Warren}

mkdir -p "$OUT"
cd "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

ca() {  # ca NAME CN
    [[ -f $1.pem && -f $1.key ]] && return
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.pem" -days "$DAYS" -subj "/O=$ORG/CN=$2" \
        -addext basicConstraints=critical,CA:true -addext keyUsage=critical,keyCertSign,cRLSign
}

leaf() {  # leaf NAME CA SUBJECT DAYS EXTENSIONS
    key "$1.key"
    openssl req -new -key "$1.key" -out "$work/$1.csr" -subj "$3"
    printf '%s\n' "$5" >"$work/$1.ext"
    # days < 0 backdates nothing but makes notAfter earlier than notBefore: an expired certificate
    openssl x509 -req -in "$work/$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -out "$1.pem" \
        -days "$4" -extfile "$work/$1.ext" 2>/dev/null
}

ca ca "$ORG test CA"
ca other-ca "$ORG other CA"
leaf server ca "/O=$ORG/CN=$SERVER_CN" "$DAYS" \
    "basicConstraints=CA:false
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$SERVER_NAMES"
client_ext="basicConstraints=CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
leaf client ca "/O=$ORG/OU=clients/CN=$CLIENT_CN" "$DAYS" "$client_ext"
leaf client-expired ca "/O=$ORG/OU=clients/CN=$CLIENT_CN" -1 "$client_ext"
leaf other-client other-ca "/O=$ORG/OU=clients/CN=$CLIENT_CN" "$DAYS" "$client_ext"
rm -f ./*.srl
echo "certificates in $(pwd)"

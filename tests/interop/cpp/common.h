// Helpers shared by the omniORB interop client and server.
#ifndef INTEROP_COMMON_H
#define INTEROP_COMMON_H

#include <omniORB4/CORBA.h>
#include <omniORB4/sslContext.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>

#include "interop.hh"

// Payload byte i of an n-byte test payload (the Rust side uses the same formula).
static inline CORBA::Octet pattern_byte(CORBA::ULong i, CORBA::ULong n) {
  return (CORBA::Octet)((i * 31u + n) & 0xffu);
}

static inline interop::Octets* make_payload(CORBA::ULong n) {
  interop::Octets* p = new interop::Octets(n);
  p->length(n);
  for (CORBA::ULong i = 0; i < n; i++) (*p)[i] = pattern_byte(i, n);
  return p;
}

// 32-bit FNV-1a of a payload.
static inline unsigned long fnv1a(const interop::Octets& p) {
  unsigned long h = 2166136261ul;
  for (CORBA::ULong i = 0; i < p.length(); i++) {
    h ^= p[i];
    h = (h * 16777619ul) & 0xfffffffful;
  }
  return h;
}

static inline const char* completion_name(CORBA::CompletionStatus c) {
  switch (c) {
    case CORBA::COMPLETED_YES: return "YES";
    case CORBA::COMPLETED_NO: return "NO";
    default: return "MAYBE";
  }
}

static inline CORBA::CompletionStatus completion_from(const std::string& s) {
  if (s == "YES") return CORBA::COMPLETED_YES;
  if (s == "NO") return CORBA::COMPLETED_NO;
  return CORBA::COMPLETED_MAYBE;
}

// Raises the system exception named `name` (a few kinds are enough for the tests).
static inline void throw_system(const std::string& name, CORBA::ULong minor,
                                CORBA::CompletionStatus c) {
#define INTEROP_SYS(N) if (name == #N) throw CORBA::N(minor, c);
  INTEROP_SYS(NO_PERMISSION)
  INTEROP_SYS(TRANSIENT)
  INTEROP_SYS(BAD_PARAM)
  INTEROP_SYS(OBJECT_NOT_EXIST)
  INTEROP_SYS(INTERNAL)
  INTEROP_SYS(NO_IMPLEMENT)
  INTEROP_SYS(MARSHAL)
  INTEROP_SYS(TIMEOUT)
  INTEROP_SYS(IMP_LIMIT)
  INTEROP_SYS(NO_RESOURCES)
  INTEROP_SYS(BAD_OPERATION)
#undef INTEROP_SYS
  throw CORBA::UNKNOWN(minor, c);
}

// omniORB's SSL transport (libomnisslTP4), configured through the sslContext static members of
// omniORB 4.2 (4.3 moved them into omni::sslContext and added setters; the installed header
// decides). They must be set before ORB_init, which builds the sslContext singleton from them.
//
// `--ssl DIR` (anywhere on the command line) is removed from argv and turns SSL on:
// - DIR/ca.pem: the CA that peers' certificates must chain to;
// - DIR/<identity>: this program's certificate chain followed by its unencrypted private key,
//   in one PEM file (omniORB reads both from key_file: SSL_CTX_use_certificate_chain_file and
//   SSL_CTX_use_PrivateKey_file on the same path);
// - verify mode SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT: mutual TLS, a server refuses
//   a client without a certificate.
// Returns whether SSL was asked for.
static inline bool take_ssl_option(int& argc, char** argv, const char* identity) {
  static std::string ca, key;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ssl") != 0 || i + 1 >= argc) continue;
    std::string dir = argv[i + 1];
    for (int j = i; j + 2 <= argc; j++) argv[j] = argv[j + 2];
    argc -= 2;
    ca = dir + "/ca.pem";
    key = dir + "/" + identity;
    sslContext::certificate_authority_file = ca.c_str();
    sslContext::key_file = key.c_str();
    sslContext::key_file_password = "";
    sslContext::verify_mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    return true;
  }
  return false;
}

#endif

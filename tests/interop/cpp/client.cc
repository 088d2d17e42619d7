// omniORB client for the interop tests: calls a Rust ORB server.
//
// Usage: interop_client [-ORB options] [--ssl DIR] <reference> <command>...
//
// --ssl DIR: omniORB's SSL transport with mutual TLS, identity DIR/client.pem, CA DIR/ca.pem
// (see take_ssl_option in common.h); needed to call a server whose IOR offers only SSL.
//
// Commands (run in order; each prints exactly one line):
//   narrow          Echo::_narrow on the reference (a remote _is_a when the type is unknown)
//   echo:N          call `call` with an N-byte payload and check it comes back unchanged
//   fail:N          call fail with an N-byte payload (expects interop::Oops)
//   sysex:TEXT      call sysex with payload TEXT (NAME,minor,COMPLETION)
//   two             call EchoTwo::two(a, b) (the Rust server must answer MARSHAL)
//   nosuch          call nosuch (the Rust servant does not implement it)
//   nonexist        CORBA::Object::_non_existent()
//   is_a:ID         CORBA::Object::_is_a(ID)
//
// Output lines:
//   RESULT <command> OK <detail>
//   RESULT <command> USER <repository id> len=<n> fnv=<hex>
//   RESULT <command> SYSTEM <NAME> <minor hex> <YES|NO|MAYBE>
//   RESULT <command> OTHER <text>
// followed by "DONE" when every command ran.
#include "common.h"

#include <iostream>

static void print_system(const std::string& cmd, const CORBA::SystemException& e) {
  printf("RESULT %s SYSTEM %s 0x%08lx %s\n", cmd.c_str(), e._name(), (unsigned long)e.minor(),
         completion_name(e.completed()));
}

static void run(CORBA::ORB_ptr orb, CORBA::Object_ptr obj, interop::Echo_var& echo,
                const std::string& cmd) {
  std::string verb = cmd, arg;
  std::string::size_type colon = cmd.find(':');
  if (colon != std::string::npos) {
    verb = cmd.substr(0, colon);
    arg = cmd.substr(colon + 1);
  }
  try {
    if (verb == "narrow") {
      echo = interop::Echo::_narrow(obj);
      printf("RESULT %s OK %s\n", cmd.c_str(), CORBA::is_nil(echo) ? "nil" : "narrowed");
    } else if (verb == "echo") {
      CORBA::ULong n = strtoul(arg.c_str(), 0, 10);
      interop::Octets_var p = make_payload(n);
      interop::Octets_var r = echo->call(p.in());
      bool same = r->length() == n;
      for (CORBA::ULong i = 0; same && i < n; i++) same = r[i] == pattern_byte(i, n);
      printf("RESULT %s OK len=%lu %s\n", cmd.c_str(), (unsigned long)r->length(),
             same ? "match" : "MISMATCH");
    } else if (verb == "fail") {
      CORBA::ULong n = strtoul(arg.c_str(), 0, 10);
      interop::Octets_var p = make_payload(n);
      try {
        interop::Octets_var r = echo->fail(p.in());
        printf("RESULT %s OK len=%lu (no exception)\n", cmd.c_str(), (unsigned long)r->length());
      } catch (interop::Oops& e) {
        printf("RESULT %s USER %s len=%lu fnv=%08lx\n", cmd.c_str(), e._rep_id(),
               (unsigned long)e.data.length(), fnv1a(e.data));
      }
    } else if (verb == "sysex") {
      interop::Octets p((CORBA::ULong)arg.size());
      p.length((CORBA::ULong)arg.size());
      for (size_t i = 0; i < arg.size(); i++) p[(CORBA::ULong)i] = (CORBA::Octet)arg[i];
      interop::Octets_var r = echo->sysex(p);
      printf("RESULT %s OK len=%lu\n", cmd.c_str(), (unsigned long)r->length());
    } else if (verb == "two") {
      interop::Octets_var a = make_payload(3), b = make_payload(5);
      // Declared in the hand-written interop.idl, on an interface derived from Echo.
      interop::EchoTwo_var two = interop::EchoTwo::_unchecked_narrow(obj);
      interop::Octets_var r = two->two(a.in(), b.in());
      printf("RESULT %s OK len=%lu\n", cmd.c_str(), (unsigned long)r->length());
    } else if (verb == "nosuch") {
      interop::Octets_var p = make_payload(1);
      interop::Octets_var r = echo->nosuch(p.in());
      printf("RESULT %s OK len=%lu\n", cmd.c_str(), (unsigned long)r->length());
    } else if (verb == "nonexist") {
      CORBA::Boolean b = obj->_non_existent();
      printf("RESULT %s OK %s\n", cmd.c_str(), b ? "true" : "false");
    } else if (verb == "is_a") {
      CORBA::Boolean b = obj->_is_a(arg.c_str());
      printf("RESULT %s OK %s\n", cmd.c_str(), b ? "true" : "false");
    } else {
      printf("RESULT %s OTHER unknown-command\n", cmd.c_str());
    }
  } catch (CORBA::SystemException& e) {
    print_system(cmd, e);
  } catch (CORBA::Exception& e) {
    printf("RESULT %s OTHER %s\n", cmd.c_str(), e._name());
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  take_ssl_option(argc, argv, "client.pem");
  try {
    CORBA::ORB_var orb = CORBA::ORB_init(argc, argv);
    if (argc < 2) {
      fprintf(stderr, "usage: %s [-ORB options] <reference> <command>...\n", argv[0]);
      return 2;
    }
    CORBA::Object_var obj;
    try {
      obj = orb->string_to_object(argv[1]);
    } catch (CORBA::SystemException& e) {
      print_system("string_to_object", e);
      printf("DONE\n");
      return 0;
    }
    interop::Echo_var echo = interop::Echo::_unchecked_narrow(obj);
    for (int i = 2; i < argc; i++) run(orb, obj, echo, argv[i]);
    printf("DONE\n");
    fflush(stdout);
    orb->destroy();
  } catch (CORBA::Exception& e) {
    fprintf(stderr, "unexpected exception %s\n", e._name());
    return 1;
  }
  return 0;
}

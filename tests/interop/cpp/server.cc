// omniORB server for the interop tests: serves interop::Echo for a Rust ORB client.
//
// Usage: interop_server [-ORB options]
//
// The object lives in omniORB's INS POA under the key "Echo", so it is reachable both through
// the printed IOR and through corbaloc:iiop:1.2@host:port/Echo. Prints "IOR:..." on one line
// once it serves, then runs until killed (or until stdin reaches end of file).
#include "common.h"

#include <unistd.h>

class EchoImpl : public POA_interop::Echo {
 public:
  interop::Octets* call(const interop::Octets& p) { return new interop::Octets(p); }

  interop::Octets* fail(const interop::Octets& p) { throw interop::Oops(p); }

  interop::Octets* sysex(const interop::Octets& p) {
    std::string s;
    for (CORBA::ULong i = 0; i < p.length(); i++) s += (char)p[i];
    std::string::size_type a = s.find(','), b = s.find(',', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) throw CORBA::BAD_PARAM(0, CORBA::COMPLETED_NO);
    throw_system(s.substr(0, a), strtoul(s.substr(a + 1, b - a - 1).c_str(), 0, 10),
                 completion_from(s.substr(b + 1)));
    return 0;  // not reached
  }

  interop::Octets* two(const interop::Octets& a, const interop::Octets& b) {
    interop::Octets* r = new interop::Octets(a);
    CORBA::ULong n = r->length();
    r->length(n + b.length());
    for (CORBA::ULong i = 0; i < b.length(); i++) (*r)[n + i] = b[i];
    return r;
  }

  interop::Octets* nosuch(const interop::Octets& p) { return new interop::Octets(p); }
};

static CORBA::ORB_ptr the_orb;

// Shuts the ORB down when stdin closes, so the server dies with the test that started it.
static void watch_stdin(void*) {
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  the_orb->shutdown(0);
}

int main(int argc, char** argv) {
  try {
    CORBA::ORB_var orb = CORBA::ORB_init(argc, argv);
    the_orb = orb;
    CORBA::Object_var obj = orb->resolve_initial_references("omniINSPOA");
    PortableServer::POA_var poa = PortableServer::POA::_narrow(obj);
    PortableServer::POAManager_var pman = poa->the_POAManager();
    pman->activate();
    EchoImpl* servant = new EchoImpl;
    PortableServer::ObjectId_var oid = PortableServer::string_to_ObjectId("Echo");
    poa->activate_object_with_id(oid, servant);
    servant->_remove_ref();
    CORBA::Object_var ref = poa->id_to_reference(oid);
    CORBA::String_var ior = orb->object_to_string(ref);
    printf("%s\n", (const char*)ior);
    fflush(stdout);
    omni_thread::create(watch_stdin, 0);
    orb->run();
    orb->destroy();
  } catch (CORBA::Exception& e) {
    fprintf(stderr, "unexpected exception %s\n", e._name());
    return 1;
  }
  return 0;
}

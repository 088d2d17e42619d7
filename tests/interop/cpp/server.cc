// omniORB server for the interop tests: serves interop::Echo (or interop::Hub) for a Rust ORB
// client.
//
// Usage: interop_server [-ORB options] [--hub [--bidir]] [--ssl DIR]
//
// Default: the Echo object lives in omniORB's INS POA under the key "Echo", so it is reachable
// both through the printed IOR and through corbaloc:iiop:1.2@host:port/Echo.
//
// --hub: serves an interop::Hub instead, in a child POA "hub" of the root POA, and prints its
// IOR. Hub::fire calls back every interop::Callback registered with Hub::registerCb.
//
// --bidir (with --hub): bidirectional GIOP as WIRE-GIOP.md §5.2 requires for an omniORB server
// that calls back a client over the connection the client opened: acceptBiDirectionalGIOP = 1,
// serverTransportRule "* unix,tcp,bidir", and the Hub's POA created with
// BiDirPolicy::BidirectionalPolicy BOTH. (-ORB options on the command line still override the
// first two.)
//
// --ssl DIR: omniORB's SSL transport with mutual TLS, identity DIR/server.pem, CA DIR/ca.pem
// (see take_ssl_option in common.h). The endpoint is still given with -ORBendPoint, e.g.
// giop:ssl:127.0.0.1: for an SSL-only server, whose IORs carry port 0 and TAG_SSL_SEC_TRANS.
//
// Prints "IOR:..." on one line once it serves, then runs until killed (or until stdin reaches
// end of file).
#include "common.h"

#include <omniORB4/BiDirPolicy.h>
#include <unistd.h>
#include <vector>

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

  interop::Octets* nosuch(const interop::Octets& p) { return new interop::Octets(p); }
};

class HubImpl : public POA_interop::Hub {
 public:
  void registerCb(interop::Callback_ptr cb) {
    if (CORBA::is_nil(cb)) throw CORBA::BAD_PARAM(0, CORBA::COMPLETED_NO);
    omni_mutex_lock l(mu_);
    cbs_.push_back(interop::Callback::_duplicate(cb));
    fprintf(stderr, "hub: callback #%lu registered\n", (unsigned long)cbs_.size());
  }

  interop::Octets* fire(const interop::Octets& p) {
    std::vector<interop::Callback_var> cbs;
    {
      omni_mutex_lock l(mu_);
      cbs = cbs_;  // Callback_var copies duplicate the references.
    }
    interop::Octets_var r = new interop::Octets;
    for (size_t i = 0; i < cbs.size(); i++) {
      interop::Octets_var got;
      try {
        got = cbs[i]->ping(p);
      } catch (CORBA::SystemException& e) {
        fprintf(stderr, "hub: ping #%lu raised %s minor 0x%08lx\n", (unsigned long)i,
                e._name(), (unsigned long)e.minor());
        throw;
      }
      fprintf(stderr, "hub: ping #%lu returned %lu bytes\n", (unsigned long)i,
              (unsigned long)got->length());
      CORBA::ULong n = r->length();
      r->length(n + got->length());
      for (CORBA::ULong j = 0; j < got->length(); j++) r[n + j] = got[j];
    }
    return r._retn();
  }

 private:
  omni_mutex mu_;
  std::vector<interop::Callback_var> cbs_;
};

static CORBA::ORB_ptr the_orb;

// Shuts the ORB down when stdin closes, so the server dies with the test that started it.
static void watch_stdin(void*) {
  char buf[256];
  while (read(0, buf, sizeof buf) > 0) {
  }
  the_orb->shutdown(0);
}

// The Echo object in the INS POA under "Echo"; returns its reference.
static CORBA::Object_ptr serve_echo(CORBA::ORB_ptr orb) {
  CORBA::Object_var obj = orb->resolve_initial_references("omniINSPOA");
  PortableServer::POA_var poa = PortableServer::POA::_narrow(obj);
  PortableServer::POAManager_var pman = poa->the_POAManager();
  pman->activate();
  EchoImpl* servant = new EchoImpl;
  PortableServer::ObjectId_var oid = PortableServer::string_to_ObjectId("Echo");
  poa->activate_object_with_id(oid, servant);
  servant->_remove_ref();
  return poa->id_to_reference(oid);
}

// The Hub in the child POA "hub" of the root POA (BidirectionalPolicy BOTH when `bidir`);
// returns its reference.
static CORBA::Object_ptr serve_hub(CORBA::ORB_ptr orb, bool bidir) {
  CORBA::Object_var obj = orb->resolve_initial_references("RootPOA");
  PortableServer::POA_var root = PortableServer::POA::_narrow(obj);
  PortableServer::POAManager_var pman = root->the_POAManager();
  CORBA::PolicyList policies;
  if (bidir) {
    // Constructed directly: ORB::create_policy would take a CORBA::Any, which lives in
    // libomniDynamic4 (not linked).
    policies.length(1);
    policies[0] = new BiDirPolicy::BidirectionalPolicy(BiDirPolicy::BOTH);
  }
  PortableServer::POA_var poa = root->create_POA("hub", pman, policies);
  pman->activate();
  HubImpl* servant = new HubImpl;
  PortableServer::ObjectId_var oid = poa->activate_object(servant);
  servant->_remove_ref();
  return poa->id_to_reference(oid);
}

int main(int argc, char** argv) {
  take_ssl_option(argc, argv, "server.pem");
  bool hub = false, bidir = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--hub") == 0) hub = true;
    if (strcmp(argv[i], "--bidir") == 0) bidir = true;
  }
  if (bidir && !hub) {
    fprintf(stderr, "--bidir needs --hub\n");
    return 2;
  }
  // WIRE-GIOP.md §5.2, points 1 and 2 (point 3 is the POA policy in serve_hub).
  const char* bidir_options[][2] = {
      {"acceptBiDirectionalGIOP", "1"},
      {"serverTransportRule", "* unix,tcp,bidir"},
      {0, 0},
  };
  try {
    CORBA::ORB_var orb = CORBA::ORB_init(argc, argv, "omniORB4", bidir ? bidir_options : 0);
    the_orb = orb;
    CORBA::Object_var ref = hub ? serve_hub(orb, bidir) : serve_echo(orb);
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

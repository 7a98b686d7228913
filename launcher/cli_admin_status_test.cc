// `athanor admin status`'s rendering of a StateStatusResponse.
#include <gtest/gtest.h>

#include "launcher/cli_commands.h"

namespace athanor::cli {
namespace {

TEST(CliAdminStatusTest, Sqlite) {
  rpc::StateStatusResponse st;
  st.set_backend("sqlite");
  st.set_location("/var/lib/athanor/state.db");
  st.set_self("coord:7700");
  EXPECT_EQ(FormatStateStatus(st),
            "backend:      sqlite\n"
            "location:     /var/lib/athanor/state.db\n"
            "answered by:  coord:7700\n");
}

TEST(CliAdminStatusTest, EtcdWithAnUnreachableMember) {
  rpc::StateStatusResponse st;
  st.set_backend("etcd");
  st.set_location("etcd://e1:2379,e2:2379/athanor");
  st.set_leader("c1:7700");
  st.set_term(42);
  st.set_self("c1:7700");
  st.set_leadership_changes(1);
  st.set_led_since_unix(0);
  rpc::StateMember* m = st.add_members();
  m->set_name("e1");
  m->add_client_urls("http://e1:2379");
  m->set_reachable(true);
  m->set_is_leader(true);
  m->set_raft_index(100);
  m->set_lag(0);
  m->set_db_size_bytes(20480);
  m = st.add_members();
  m->set_name("e2");
  m->add_client_urls("http://e2:2379");
  m->add_client_urls("http://10.0.0.2:2379");
  m->set_lag(-1);
  EXPECT_EQ(FormatStateStatus(st),
            "backend:      etcd\n"
            "location:     etcd://e1:2379,e2:2379/athanor\n"
            "leader:       c1:7700 (term 42)\n"
            "answered by:  c1:7700\n"
            "leads since:  (not leading)\n"
            "terms won:    1 (by this process)\n"
            "\n"
            "MEMBER  CLIENT URLS                          REACHABLE  RAFT LEADER  RAFT INDEX  LAG  DB BYTES\n"
            "e1      http://e1:2379                       yes        yes          100         0    20480\n"
            "e2      http://e2:2379,http://10.0.0.2:2379  NO                      -           -    -\n");
}

}  // namespace
}  // namespace athanor::cli

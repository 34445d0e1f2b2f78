"""API keys kept in the store, managed with Algolia's Python client 4.x
(`SearchClientSync.add_api_key`, `list_api_keys`, `get_api_key`,
`update_api_key`, `delete_api_key`) against affinity serve, and the keys it
made used by the Insights client (one limited by maxQueriesPerIPPerHour). Prints what each call answered as one
JSON line.

Usage: python api_keys.py HOST PORT APP ADMIN_KEY
"""

import json
import signal
import sys
import time

from algoliasearch.http.exceptions import RequestException
from algoliasearch.http.hosts import Host, HostsCollection
from algoliasearch.insights.client import InsightsClientSync
from algoliasearch.insights.config import InsightsConfig
from algoliasearch.personalization.client import PersonalizationClientSync
from algoliasearch.personalization.config import PersonalizationConfig
from algoliasearch.search.client import SearchClientSync
from algoliasearch.search.config import SearchConfig

host, port, app, admin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
# A client that waited out a 429's Retry-After (20 minutes here) would
# hang the test: end the script instead.
signal.alarm(120)


def at_server(config):
    config.hosts = HostsCollection([Host(url=host, scheme="http", port=port)])
    return config


def outcome(call):
    """The answer of `call` as a dict, or its refusal's status and message."""
    try:
        answer = call()
        return answer.to_dict() if hasattr(answer, "to_dict") else answer
    except RequestException as e:
        return {"status": e.status_code, "message": str(e)}


def send_event(key):
    config = at_server(InsightsConfig(app, key))
    # The client waits out a 429's Retry-After and tries again (3 times by
    # default): here the 429 itself is the answer wanted.
    config.max_rate_limit_retries = 0
    insights = InsightsClientSync.create_with_config(config)
    event = {
        "eventType": "click",
        "eventName": "Product Clicked",
        "index": "products",
        "userToken": "py-keys",
        "filters": ["brand:Apple"],
    }
    return outcome(lambda: insights.push_events({"events": [event]}))


search = SearchClientSync.create_with_config(at_server(SearchConfig(app, admin)))
out = {}
out["added"] = outcome(
    lambda: search.add_api_key({"acl": ["search"], "description": "py front", "validity": 3600})
)
key = out["added"]["key"]
out["listed"] = outcome(lambda: search.list_api_keys())
out["got"] = outcome(lambda: search.get_api_key(key))
out["search_key_sends_events"] = send_event(key)
out["updated"] = outcome(
    lambda: search.update_api_key(key, {"acl": ["search"], "description": "py changed"})
)
out["got_after_update"] = outcome(lambda: search.get_api_key(key))
out["unknown_acl"] = outcome(lambda: search.add_api_key({"acl": ["addObject"]}))
out["deleted"] = outcome(lambda: search.delete_api_key(key))
out["got_after_delete"] = outcome(lambda: search.get_api_key(key))
out["deleted_key_sends_events"] = send_event(key)
# maxQueriesPerIPPerHour, as the client's ApiKey model sends it: two
# requests an hour from this address, then 429. (A search key: the
# client's ACL names have no `events`, so it cannot read back an events
# key. Its events are refused with 403, but count.)
out["limited"] = outcome(
    lambda: search.add_api_key({"acl": ["search"], "maxQueriesPerIPPerHour": 2})
)
limited = out["limited"]["key"]
out["got_limited"] = outcome(lambda: search.get_api_key(limited))
out["limited_sends"] = [send_event(limited).get("status") for _ in range(3)]
out["limited_deleted"] = outcome(lambda: search.delete_api_key(limited))
# Algolia's Personalization API asks for `recommendation`: a key made
# with it (and `search`) reads back and lists through this client, and
# the Personalization client reads profiles and the strategy with it. It
# may not change the strategy (that stays admin here).
out["recommendation"] = outcome(
    lambda: search.add_api_key({"acl": ["search", "recommendation"], "description": "py recs"})
)
recs = out["recommendation"]["key"]
out["got_recommendation"] = outcome(lambda: search.get_api_key(recs))
out["listed_recommendation"] = outcome(lambda: search.list_api_keys())
personalization = PersonalizationClientSync.create_with_config(
    at_server(PersonalizationConfig(app, recs, "us"))
)
admin_personalization = PersonalizationClientSync.create_with_config(
    at_server(PersonalizationConfig(app, admin, "us"))
)
strategy = {
    "eventsScoring": [{"eventName": "Product Clicked", "eventType": "click", "score": 10}],
    "facetsScoring": [{"facetName": "brand", "score": 100}],
    "personalizationImpact": 50,
}
out["admin_sets_strategy"] = outcome(
    lambda: admin_personalization.set_personalization_strategy(strategy)
)
out["admin_sends_event"] = send_event(admin)
out["recommendation_reads_strategy"] = outcome(
    lambda: personalization.get_personalization_strategy()
)
out["recommendation_reads_profile"] = outcome(
    lambda: personalization.get_user_token_profile("py-keys")
)
out["recommendation_sets_strategy"] = outcome(
    lambda: personalization.set_personalization_strategy(strategy)
)
out["recommendation_deleted"] = outcome(lambda: search.delete_api_key(recs))
print(json.dumps(out))

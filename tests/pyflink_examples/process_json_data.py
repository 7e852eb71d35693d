# PyFlink 2.3.0's example pyflink/examples/datastream/process_json_data.py, copied unchanged except that the
# import prefix `pyflink` is replaced by `sparkpoint` (import lines only).
################################################################################
#  Licensed to the Apache Software Foundation (ASF) under one
#  or more contributor license agreements.  See the NOTICE file
#  distributed with this work for additional information
#  regarding copyright ownership.  The ASF licenses this file
#  to you under the Apache License, Version 2.0 (the
#  "License"); you may not use this file except in compliance
#  with the License.  You may obtain a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
#  Unless required by applicable law or agreed to in writing, software
#  distributed under the License is distributed on an "AS IS" BASIS,
#  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
#  See the License for the specific language governing permissions and
# limitations under the License.
################################################################################
import json
import logging
import sys

from sparkpoint.datastream import StreamExecutionEnvironment


def process_json_data():
    env = StreamExecutionEnvironment.get_execution_environment()

    # define the source
    ds = env.from_collection(
        collection=[
            (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany", "city": "Berlin"}}'),
            (2, '{"name": "hello", "tel": 135, "addr": {"country": "China", "city": "Shanghai"}}'),
            (3, '{"name": "world", "tel": 124, "addr": {"country": "USA", "city": "NewYork"}}'),
            (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China", "city": "Hangzhou"}}')]
    )

    def update_tel(data):
        # parse the json
        json_data = json.loads(data[1])
        json_data['tel'] += 1
        return data[0], json_data

    def filter_by_country(data):
        # the json data could be accessed directly, there is no need to parse it again using
        # json.loads
        return "China" in data[1]['addr']['country']

    ds.map(update_tel).filter(filter_by_country).print()

    # submit for execution
    env.execute()


if __name__ == '__main__':
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(message)s")

    process_json_data()
